// Removes blobs that no file version references any more: the bytes of deleted versions, and of
// uploads refused or killed after their bytes were stored. A blob is only removed once it has not been
// written, reused or released (BlobStore.touch) for `minAgeMs`, so a backup or an upload that is about
// to reference it has long finished with it.
//
// A write pins its blob (BlobStore.isPinned) from the moment its digest is known until its version is
// committed, and touches it; just before its commit's transaction it checks that the blob is still
// there (BlobStore.stillStored), and in it that the blob is still kept (BlobStore.keeps).
// The sweeper asks the metadata whether a blob is referenced, then the store looks at its pins and age
// again just before removing it: a write of this process that stored the blob meanwhile keeps it, and
// one that comes after the removal stores it again. A process sharing the store is kept off by the age
// alone: a write's transaction checks it is within `minAgeMs` of storing or touching the bytes; one
// that waited longer commits nothing, touches them again, and finds them gone (storage_unavailable)
// rather than reference removed bytes. A write of another process that lands between the store's last
// check and its removal is the one case left: its bytes are removed after it trusted them. On such a
// shared store each removal keeps a copy, and every sweep first puts back the removed blobs referenced
// since (BlobStore.restoreRemoved); a copy goes once two sweep intervals have passed, by when any such
// write has committed (within one interval of its bytes) or given up.
import { setImmediate as yieldToEvents } from 'node:timers/promises';
import type { BlobStore } from './blob-store.ts';

export interface SweepReport {
  removed: number;
  bytes: number;
  /** Temp objects and unfinished uploads of interrupted writes. */
  leftovers: number;
  /** Removed blobs put back because a write committed a reference to them meanwhile. */
  restored: number;
}

export class BlobSweeper {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();

  constructor(
    readonly store: BlobStore,
    /** Whether any file version references the blob now, from committed metadata. */
    readonly isReferenced: (sha256: string) => Promise<boolean>,
    readonly minAgeMs: number,
  ) {}

  async sweep(): Promise<SweepReport> {
    const now = Date.now();
    const report: SweepReport = { removed: 0, bytes: 0, leftovers: 0, restored: 0 };
    report.restored = await this.store.restoreRemoved(this.isReferenced, 2 * this.minAgeMs);
    let seen = 0;
    for await (const blob of this.store.list()) {
      if (++seen % 256 === 0) await yieldToEvents();
      if (
        now - blob.modifiedMs < this.minAgeMs ||
        this.store.isPinned(blob.sha256) ||
        (await this.isReferenced(blob.sha256))
      )
        continue;
      if (await this.store.remove(blob.sha256, this.minAgeMs)) {
        report.removed++;
        report.bytes += blob.bytes;
      }
    }
    report.leftovers = await this.store.sweepLeftovers(this.minAgeMs);
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
