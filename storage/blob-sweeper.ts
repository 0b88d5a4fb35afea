// Removes blobs that no file version references any more: the bytes of deleted versions, and of
// uploads refused after their bytes were stored. A blob is only removed once it has not been written,
// reused or released (BlobStore.touch) for `minAgeMs`, so a backup or an upload that is about to
// reference it has long finished with it.
//
// A write pins its blob (BlobStore.isPinned) from the moment its digest is known until its version is
// committed, and touches it; its commit checks that the blob is still there. The sweeper asks the
// metadata whether a blob is referenced, then looks at its pins and age again and removes it in the
// same synchronous step: a write of this process that stored the blob meanwhile keeps it, and one that
// comes after the removal stores it again. A process sharing the blob folder (BERTH_BLOB_DIR) is kept
// off by the age alone: its write must commit within `minAgeMs` of storing the bytes, or it finds them
// gone and fails with storage_unavailable rather than reference removed bytes.
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
    readonly isReferenced: (sha256: string) => Promise<boolean>,
    /** Whether a write of this process stored the blob and has not committed yet. */
    readonly isPinned: (sha256: string) => boolean,
    readonly minAgeMs: number,
  ) {}

  async sweep(now = Date.now()): Promise<SweepReport> {
    const report: SweepReport = { removed: 0, bytes: 0 };
    for (const shard of (await fsp.readdir(this.root)).filter((name) => SHARD.test(name)).sort()) {
      const dir = path.join(this.root, shard);
      for (const name of await fsp.readdir(dir)) {
        if (!SHA256_HEX.test(name)) continue;
        const file = path.join(dir, name);
        const old = () => {
          const stat = fs.statSync(file, { throwIfNoEntry: false });
          return stat && now - stat.mtimeMs >= this.minAgeMs ? stat : undefined;
        };
        if (this.isPinned(name) || !old() || (await this.isReferenced(name))) continue;
        const stat = this.isPinned(name) ? undefined : old();
        if (!stat) continue;
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
