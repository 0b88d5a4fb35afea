// Fencing: one writer per database, whatever the network does. Another node takes a database node's
// databases over only once that node's heartbeat, as the metadata database stamped it, is older than
// BERTH_DATABASE_FAILOVER_MS on the database's clock, in the same statement that switches the placement
// (failover.ts, move.ts). A node serves its databases only while a heartbeat it *sent* less than half
// that time ago has been written: a beat stamped by the database was sent before, so by the time any
// other node may take over, this one has stopped for half the failover time at least, whether its link
// to the metadata is cut or only slow, and with no clock compared across machines (each side measures
// time passing on its own clock).
//
// A fenced node's beats stop stamping its heartbeat and only probe the link, so that its heartbeat ages
// and its databases are taken over however slow the link is. Once a probe comes back within half the
// failover time, its beats stamp again; when a stamped one comes back in time, the node sets aside what
// was taken over meanwhile (staying fenced while a recovery of its databases is under way elsewhere,
// whose switch then finds its heartbeat fresh and gives up), then serves the rest again.

export interface FenceOptions {
  /** Half the failover time: the node fences itself this long after it sent its last written heartbeat. */
  fenceMs: number;
  /** The node stops serving its databases (and their replication stops, having shipped what it had). */
  fenced: () => Promise<void>;
  /** A fresh heartbeat was written: it sets aside what was taken over, then serves the rest (or throws: not yet). */
  restored: () => Promise<void>;
  /** How often the time since the last heartbeat is looked at. */
  checkMs?: number;
}

export class Fence {
  readonly #options: FenceOptions;
  /** When the newest heartbeat known to be written was sent (`performance.now()`). */
  #sentAt = performance.now();
  #state: 'serving' | 'fencing' | 'fenced' | 'restoring' = 'serving';
  /** Fenced, the link answered the last beat in time: beats stamp the heartbeat again. */
  #linkFresh = false;
  #pending: Promise<void> = Promise.resolve();
  readonly #timer: NodeJS.Timeout;

  constructor(options: FenceOptions) {
    this.#options = options;
    this.#timer = setInterval(() => this.#check(), options.checkMs ?? 1000);
    this.#timer.unref();
  }

  /** Whether this node serves its databases now. */
  get serving(): boolean {
    return this.#state === 'serving';
  }

  /** Whether the node's next beat stamps its heartbeat: not while fenced on a link found slow or cut. */
  get stamps(): boolean {
    return this.#state === 'serving' || this.#state === 'restoring' || this.#linkFresh;
  }

  /** A beat sent at `sentAt` (`performance.now()`) was just written; `stamped`: it stamped the heartbeat. */
  renewed(sentAt: number, stamped = true): void {
    const fresh = performance.now() - sentAt < this.#options.fenceMs;
    if (this.#state === 'fenced' || this.#state === 'fencing') this.#linkFresh = fresh;
    if (!stamped) return;
    this.#sentAt = Math.max(this.#sentAt, sentAt);
    // A beat that took half the failover time to be written vouches for nothing: others may judge by it.
    if (this.#state !== 'fenced' || !fresh) return;
    this.#state = 'restoring';
    this.#pending = this.#options.restored().then(
      () => {
        this.#state = 'serving';
        this.#linkFresh = false;
        // Restoring took its time: the beat that allowed it may be too old by now.
        this.#check();
      },
      () => {
        // Not settled: stays fenced, and tries again at the next heartbeat.
        this.#state = 'fenced';
      },
    );
  }

  #check(): void {
    if (this.#state !== 'serving' || performance.now() - this.#sentAt < this.#options.fenceMs) return;
    this.#state = 'fencing';
    this.#linkFresh = false;
    this.#pending = this.#options.fenced().finally(() => {
      this.#state = 'fenced';
    });
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pending.catch(() => undefined);
  }
}
