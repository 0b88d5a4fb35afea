// What a start has opened, released in the reverse order: each part registers its close the moment it
// is open, so a start that fails half-way releases exactly what it had opened, and a close releases
// everything even when one part's close throws (the failures are reported together at the end).

export class CloseStack {
  readonly #closes: Array<{ what: string; close: () => unknown }> = [];
  #closed = false;

  /** Registers the close of the part just opened; parts close last-opened first. */
  defer(what: string, close: () => unknown): void {
    if (this.#closed) throw new Error(`${what} was opened after the start was released`);
    this.#closes.push({ what, close });
  }

  /** Starts a periodic job and registers its stop; returns the job. */
  started<T extends { start(): void; stop(): unknown }>(what: string, job: T): T {
    job.start();
    this.defer(what, () => job.stop());
    return job;
  }

  /** Closes every registered part in reverse order; throws one AggregateError naming the parts that failed. */
  async close(): Promise<void> {
    this.#closed = true;
    const failures: Error[] = [];
    for (let part = this.#closes.pop(); part; part = this.#closes.pop()) {
      try {
        await part.close();
      } catch (err) {
        failures.push(new Error(`closing ${part.what} failed`, { cause: err }));
      }
    }
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) throw new AggregateError(failures, `closing ${failures.length} parts failed`);
  }
}
