// The warm pool: at most one live worker per deployed version, reused across requests (a worker serves
// requests concurrently). Idle workers are evicted after a while; at capacity, or when the workers
// hold more memory than their budget (shed), the least recently used idle workers make room. A
// retired version's worker finishes its requests in flight, then stops.

/** What the pool needs of a worker: function workers and site database processes alike. */
export interface PoolWorker {
  readonly alive: boolean;
  /** Requests sent and not yet answered. */
  readonly inflight: number;
  readonly exited: Promise<unknown>;
  kill(reason: 'disposed'): void;
}

export interface PoolOptions<W extends PoolWorker> {
  maxWorkers: number;
  idleMs: number;
  start: (key: string) => Promise<W>;
  /**
   * The worker for `key` made from a process started ahead of need (a spare), or null when there is
   * none. A spare already counts against maxWorkers, so taking one evicts nothing.
   */
  adopt?: (key: string) => Promise<W> | null;
}

interface Entry<W extends PoolWorker> {
  key: string;
  worker: W;
  lastUsed: number;
  retired: boolean;
}

/** No worker could be started because every slot is busy serving requests. */
export class PoolFullError extends Error {}

export class WorkerPool<W extends PoolWorker> {
  readonly #options: PoolOptions<W>;
  readonly #live = new Map<string, Entry<W>>();
  readonly #retired = new Set<Entry<W>>();
  readonly #starting = new Map<string, Promise<Entry<W>>>();
  readonly #sweeper: NodeJS.Timeout;

  constructor(options: PoolOptions<W>) {
    this.#options = options;
    this.#sweeper = setInterval(() => this.#evictIdle(), Math.min(options.idleMs, 1000));
    this.#sweeper.unref();
  }

  get size(): number {
    return this.#live.size + this.#retired.size;
  }

  /** Workers being started for requests. */
  get starting(): number {
    return this.#starting.size;
  }

  /** The live worker for `key` when there is one, without waiting; the caller must call release() when done. */
  live(key: string): W | undefined {
    const entry = this.#live.get(key);
    if (!entry?.worker.alive) return undefined;
    entry.lastUsed = Date.now();
    return entry.worker;
  }

  /** The live worker for `key`, started if needed; the caller must call release() when done. */
  async acquire(key: string): Promise<W> {
    let entry = this.#live.get(key);
    if (!entry?.worker.alive) {
      if (entry) this.#live.delete(key);
      let starting = this.#starting.get(key);
      if (!starting) {
        starting = this.#start(key).finally(() => this.#starting.delete(key));
        this.#starting.set(key, starting);
      }
      entry = await starting;
    }
    entry.lastUsed = Date.now();
    return entry.worker;
  }

  /** Called when a request on `worker` is over: a retired worker stops once it has nothing in flight. */
  release(worker: W): void {
    for (const entry of this.#retired) {
      if (entry.worker === worker && worker.inflight === 0) {
        worker.kill('disposed');
        this.#retired.delete(entry);
      }
    }
  }

  /** Retires the workers of keys matching `predicate`: new requests will start fresh ones. */
  retire(predicate: (key: string) => boolean): void {
    for (const [key, entry] of this.#live) {
      if (!predicate(key)) continue;
      this.#live.delete(key);
      entry.retired = true;
      if (entry.worker.inflight === 0) entry.worker.kill('disposed');
      else this.#retired.add(entry);
    }
  }

  /**
   * Stops workers with no request in flight, least recently used first, until `freed` bytes reach
   * `bytes` (each worker counting `sizeOf` it). Returns how many stopped.
   */
  shed(bytes: number, sizeOf: (worker: W) => number): number {
    const idle = [...this.#live.values()]
      .filter((e) => e.worker.inflight === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    let freed = 0;
    let stopped = 0;
    for (const entry of idle) {
      if (freed >= bytes) break;
      freed += sizeOf(entry.worker);
      this.#live.delete(entry.key);
      entry.worker.kill('disposed');
      stopped++;
    }
    return stopped;
  }

  /** Every worker, for the memory watch. */
  workers(): W[] {
    return [...this.#live.values(), ...this.#retired].map((e) => e.worker);
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
    await Promise.allSettled(this.#starting.values());
    for (const entry of [...this.#live.values(), ...this.#retired]) entry.worker.kill('disposed');
    this.#live.clear();
    this.#retired.clear();
  }

  async #start(key: string): Promise<Entry<W>> {
    const adopted = this.#options.adopt?.(key) ?? null;
    if (!adopted) this.#makeRoom();
    const worker = await (adopted ?? this.#options.start(key));
    const entry: Entry<W> = { key, worker, lastUsed: Date.now(), retired: false };
    this.#live.set(key, entry);
    void worker.exited.then(() => {
      if (this.#live.get(key) === entry) this.#live.delete(key);
      this.#retired.delete(entry);
    });
    return entry;
  }

  #makeRoom(): void {
    if (this.size + this.#starting.size < this.#options.maxWorkers) return;
    const idle = [...this.#live.values()]
      .filter((e) => e.worker.inflight === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed)[0];
    if (!idle) throw new PoolFullError(`all ${this.#options.maxWorkers} workers are busy`);
    this.#live.delete(idle.key);
    idle.worker.kill('disposed');
  }

  #evictIdle(): void {
    const cutoff = Date.now() - this.#options.idleMs;
    for (const [key, entry] of this.#live) {
      if (entry.worker.inflight === 0 && entry.lastUsed < cutoff) {
        this.#live.delete(key);
        entry.worker.kill('disposed');
      }
    }
  }
}
