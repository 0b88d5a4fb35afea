// Spare workers: Deno processes started ahead of need. A spare has booted, loaded the shim and opened
// its channel, and waits on standby bound to no function and no site; a cold call takes one and
// gives it its function (DenoWorker.bind), which spares the call Deno's boot. A spare taken is never
// a spare again: it serves that one function version for the rest of its life.
//
// Spares start one at a time, and only when the caller says so (mayStart: a slot is free under the
// worker cap and no worker is starting for a request), so refilling never competes with the cold
// starts that live requests wait for. They run at the lowered CPU priority of every tenant process.
import type { PoolWorker } from './pool.ts';

export interface SparesOptions<W extends PoolWorker> {
  /** How many spares to keep started and not taken; 0 keeps none. */
  count: number;
  start: () => Promise<W>;
  /** Whether another spare may start now. */
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
  #booting = false;
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

  /** Takes a spare: one on standby if any, else the one still booting; null when there is none. */
  take(): Promise<W> | null {
    const standing = this.#spares.findIndex((spare) => spare.worker?.alive);
    const index = standing >= 0 ? standing : this.#spares.findIndex((spare) => !spare.worker);
    return index >= 0 ? this.#spares.splice(index, 1)[0]!.started : null;
  }

  /** Starts the next spare if one is missing and mayStart allows; each start that ends calls this again. */
  fill(): void {
    if (this.#closed || this.#booting || this.#retry || this.#spares.length >= this.#options.count || !this.#options.mayStart()) return;
    this.#booting = true;
    const spare: Spare<W> = { started: this.#options.start() };
    this.#spares.push(spare);
    spare.started.then(
      (worker) => {
        this.#booting = false;
        this.#failures = 0;
        spare.worker = worker;
        // A spare runs no tenant code: one that stops before it is taken has failed.
        void worker.exited.then((reason) => {
          if (this.#remove(spare)) this.#failed(new Error(`the spare stopped on standby (${String(reason)})`));
        });
        this.fill();
      },
      (err: unknown) => {
        this.#booting = false;
        this.#remove(spare);
        this.#failed(err);
      },
    );
  }

  /** Stops every spare not taken, once it has finished booting; none starts afterwards. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    const spares = this.#spares.splice(0);
    await Promise.allSettled(spares.map((spare) => spare.started.then((worker) => worker.kill('disposed'))));
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
