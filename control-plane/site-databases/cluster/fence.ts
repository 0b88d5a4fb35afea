// Fencing: one writer per database, whatever the network does. Another node takes a database node's
// databases over once that node's heartbeat is older than BERTH_DATABASE_FAILOVER_MS (failover.ts). A
// node that has not managed to write its heartbeat for half that time stops serving its databases
// (calls answer 503 database_unavailable) — so it has stopped long before anyone may take over, even
// when it can still reach its clients but not the metadata. When its heartbeat is written again, it
// first sets aside what was taken over meanwhile, then serves the rest again.

export interface FenceOptions {
  /** Half the failover time: the node fences itself this long after its last heartbeat was written. */
  fenceMs: number;
  /** The node stops serving its databases (and their replication stops, having shipped what it had). */
  fenced: () => Promise<void>;
  /** Its heartbeat was written again: it sets aside what was taken over, then serves the rest. */
  restored: () => Promise<void>;
  /** How often the time since the last heartbeat is looked at. */
  checkMs?: number;
}

export class Fence {
  readonly #options: FenceOptions;
  #renewedAt = performance.now();
  #state: 'serving' | 'fenced' | 'changing' = 'serving';
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

  /** The node's heartbeat was just written. */
  renewed(): void {
    this.#renewedAt = performance.now();
    if (this.#state !== 'fenced') return;
    this.#state = 'changing';
    this.#pending = this.#options.restored().then(
      () => {
        this.#state = 'serving';
      },
      () => {
        // Not settled: stays fenced, and tries again at the next heartbeat.
        this.#state = 'fenced';
      },
    );
  }

  #check(): void {
    if (this.#state !== 'serving' || performance.now() - this.#renewedAt < this.#options.fenceMs) return;
    this.#state = 'changing';
    this.#pending = this.#options.fenced().finally(() => {
      this.#state = 'fenced';
    });
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pending.catch(() => undefined);
  }
}
