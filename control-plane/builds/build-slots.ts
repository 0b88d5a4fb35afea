// How many builds a node runs at once: each is a Deno process with its bundler, so a burst of
// deployments (of one account or many) waits for a slot, in the order it came, rather than starting a
// process each and taking the node's cores from the sites it serves.
export class BuildSlots {
  readonly #waiting: Array<() => void> = [];
  #free: number;

  constructor(slots: number) {
    this.#free = slots;
  }

  /** Runs `work` once a slot is free. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    }
  }
}
