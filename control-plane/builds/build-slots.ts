// How many builds a node runs at once: each is a Deno process with its bundler, so a burst of
// deployments waits for a slot rather than starting a process each and taking the node's cores from the
// sites it serves. The accounts waiting take turns: a slot that frees goes to the next account in turn
// (each account's builds in the order they came), so one account's burst never holds back another's.
export class BuildSlots {
  /** The builds waiting, by account, in the order the accounts take their turns. */
  readonly #waiting = new Map<string, Array<() => void>>();
  #free: number;

  constructor(slots: number) {
    this.#free = slots;
  }

  /** Runs `work`, a build for `accountId`, once a slot is free for it. */
  async run<T>(accountId: string, work: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else
      await new Promise<void>((resolve) => {
        const queue = this.#waiting.get(accountId);
        if (queue) queue.push(resolve);
        else this.#waiting.set(accountId, [resolve]);
      });
    try {
      return await work();
    } finally {
      this.#next();
    }
  }

  /** Gives the freed slot to the first account in turn, which then goes to the back of the line. */
  #next(): void {
    const turn = this.#waiting.entries().next();
    if (turn.done) {
      this.#free++;
      return;
    }
    const [accountId, queue] = turn.value;
    this.#waiting.delete(accountId);
    const start = queue.shift()!;
    if (queue.length > 0) this.#waiting.set(accountId, queue);
    start();
  }
}
