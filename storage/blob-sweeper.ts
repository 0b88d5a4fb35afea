// Removes blobs that no file version references any more: the bytes of deleted versions, and of
// uploads refused after their bytes were stored. A blob is only removed once it has not been written,
// reused or released (BlobStore.touch) for `minAgeMs`, so a backup or an upload that is about to
// reference it has long finished with it.
//
// Each blob is checked and removed in one synchronous step on the event loop, and a file write checks,
// in its own synchronous commit, that its blob is still there: so a commit can never reference a
// blob that the sweeper removed, whichever of the two runs first.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { setImmediate as yieldToEvents } from 'node:timers/promises';

const SHA256_HEX = /^[0-9a-f]{64}$/;
const SHARD = /^[0-9a-f]{2}$/;

export interface SweepReport {
  removed: number;
  bytes: number;
}

export class BlobSweeper {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();

  constructor(
    readonly root: string,
    /** Whether any file version references the blob now, from committed metadata. */
    readonly isReferenced: (sha256: string) => boolean,
    readonly minAgeMs: number,
  ) {}

  async sweep(now = Date.now()): Promise<SweepReport> {
    const report: SweepReport = { removed: 0, bytes: 0 };
    for (const shard of (await fsp.readdir(this.root)).filter((name) => SHARD.test(name)).sort()) {
      const dir = path.join(this.root, shard);
      for (const name of await fsp.readdir(dir)) {
        if (!SHA256_HEX.test(name)) continue;
        const file = path.join(dir, name);
        const stat = fs.statSync(file, { throwIfNoEntry: false });
        if (!stat || now - stat.mtimeMs < this.minAgeMs || this.isReferenced(name)) continue;
        fs.unlinkSync(file);
        report.removed++;
        report.bytes += stat.size;
      }
      await yieldToEvents();
    }
    return report;
  }

  /** Sweeps every `intervalMs`, reporting what each sweep removed; the first sweep comes after one interval. */
  start(intervalMs: number, report: (result: SweepReport) => void, fail: (err: unknown) => void): void {
    this.#timer = setInterval(() => {
      this.#running = this.sweep().then(report, fail);
    }, intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }
}
