// Spare workers: Deno processes started ahead of need. A spare has booted, loaded the shim and opened
// its channel, and waits on standby bound to no function and no site; a cold call takes one and
// gives it its function (DenoWorker.bind), which spares the call Deno's boot. A spare taken is never
// a spare again: it serves that one function version for the rest of its life.
//
// In the background, spares start one at a time and only when the caller says so (mayStart: a slot is
// free under the worker cap and no worker is starting for a request), so refilling never competes
// with the cold starts that requests wait for. A call that finds none left starts a spare of its own,
// but no more than `parallel` spares boot at once, the others waiting their turn: processes booting
// together on too few CPUs only slow each other down, and the workers already up that share them.
// Spares run Berth's code only until they are bound, so a boot's time is Deno's, never a tenant's.
import type { PoolWorker } from './pool.ts';

export interface SparesOptions<W extends PoolWorker> {
  /** How many spares to keep started and not taken; 0 keeps none, and none is ever started. */
  count: number;
  /** How many spares may boot at once. */
  parallel: number;
  start: () => Promise<W>;
  /** Whether another spare may start in the background now. */
  mayStart: () => boolean;
  /** A spare could not start; the next try waits, longer after each failure in a row. */
  onFailure: (err: unknown) => void;
}

interface Spare<W> {
  started: Promise<W>;
  /** Set once the spare is on standby. */
  worker?: W;
}

/** The wait before the next try after a failure, doubled after each further one up to the maximum. */
const RETRY_MS = 1000;
const MAX_RETRY_MS = 60_000;

export class Spares<W extends PoolWorker> {
  readonly #options: SparesOptions<W>;
  /** Started and not taken, in the order they were started. */
  readonly #spares: Array<Spare<W>> = [];
  /** Spares booting, at most `parallel`. */
  #boots = 0;
  /** Spares waiting for their turn to boot. */
  readonly #turns: Array<() => void> = [];
  #failures = 0;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: SparesOptions<W>) {
    this.#options = options;
  }

  /** Spares started and not taken, on standby or still booting. */
  get count(): number {
    return this.#spares.length;
  }

  /** Spares on standby. */
  workers(): W[] {
    return this.#spares.flatMap((spare) => (spare.worker?.alive ? [spare.worker] : []));
  }

  /**
   * Takes a spare: one on standby if any, else one still booting, else, when `slotFree` says the
   * taker has a slot under the worker cap, a spare started for it in its turn. Null when there is
   * none to take or start (spares are off, failing, or the server is stopping).
   */
  take(slotFree: boolean): Promise<W> | null {
    const standing = this.#spares.findIndex((spare) => spare.worker?.alive);
    const index = standing >= 0 ? standing : this.#spares.findIndex((spare) => !spare.worker);
    if (index >= 0) return this.#spares.splice(index, 1)[0]!.started;
    if (!slotFree || this.#options.count === 0 || this.#retry || this.#closed) return null;
    const started = this.#boot();
    started.then(
      () => (this.#failures = 0),
      (err: unknown) => this.#failed(err),
    );
    return started;
  }

  /** Starts the next spare if one is missing, none is booting and mayStart allows; each that ends calls this again. */
  fill(): void {
    if (
      this.#closed ||
      this.#retry ||
      this.#boots > 0 ||
      this.#spares.length >= this.#options.count ||
      !this.#options.mayStart()
    )
      return;
    const spare: Spare<W> = { started: this.#boot() };
    this.#spares.push(spare);
    spare.started.then(
      (worker) => {
        this.#failures = 0;
        spare.worker = worker;
        // A spare runs no tenant code: one that stops before it is taken has failed.
        void worker.exited.then((reason) => {
          if (this.#remove(spare)) this.#failed(new Error(`the spare stopped on standby (${String(reason)})`));
        });
        this.fill();
      },
      (err: unknown) => {
        this.#remove(spare);
        this.#failed(err);
      },
    );
  }

  /** Stops every spare not taken, once it has finished booting; none starts afterwards. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    for (const turn of this.#turns.splice(0)) turn();
    const spares = this.#spares.splice(0);
    await Promise.allSettled(spares.map((spare) => spare.started.then((worker) => worker.kill('disposed'))));
  }

  /** Starts a spare once fewer than `parallel` are booting; a boot that ends hands its turn on. */
  async #boot(): Promise<W> {
    if (this.#boots < this.#options.parallel) this.#boots++;
    else await new Promise<void>((turn) => this.#turns.push(turn));
    try {
      if (this.#closed) throw new Error('the runtime is stopping');
      return await this.#options.start();
    } finally {
      const next = this.#turns.shift();
      if (next) next();
      else if (!this.#closed) this.#boots--;
    }
  }

  /** Removes a spare not taken; false when it was taken. */
  #remove(spare: Spare<W>): boolean {
    const index = this.#spares.indexOf(spare);
    if (index >= 0) this.#spares.splice(index, 1);
    return index >= 0;
  }

  #failed(err: unknown): void {
    if (this.#closed) return;
    this.#options.onFailure(err);
    this.#failures++;
    clearTimeout(this.#retry);
    this.#retry = setTimeout(
      () => {
        this.#retry = undefined;
        this.fill();
      },
      Math.min(MAX_RETRY_MS, RETRY_MS * 2 ** (this.#failures - 1)),
    );
    this.#retry.unref();
  }
}
