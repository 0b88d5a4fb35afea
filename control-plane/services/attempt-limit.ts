// Counts failed attempts per key (an email, an address) in a fixed window, so guessing passwords is
// slow for one account and for one client alike. In memory: a restart forgets, which only helps the
// legitimate user who was locked out.
export class AttemptLimit {
  readonly #max: number;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #failures = new Map<string, { count: number; resetAt: number }>();

  constructor(max: number, windowMs: number, now: () => number = Date.now) {
    this.#max = max;
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /** Seconds until `key` may try again, or 0 when it may now. */
  retryAfter(key: string): number {
    const entry = this.#failures.get(key);
    if (!entry || entry.resetAt <= this.#now()) return 0;
    return entry.count >= this.#max ? Math.ceil((entry.resetAt - this.#now()) / 1000) : 0;
  }

  fail(key: string): void {
    const now = this.#now();
    const entry = this.#failures.get(key);
    if (!entry || entry.resetAt <= now) {
      this.#sweep(now);
      this.#failures.set(key, { count: 1, resetAt: now + this.#windowMs });
    } else {
      entry.count++;
    }
  }

  clear(key: string): void {
    this.#failures.delete(key);
  }

  /** Forgets windows that are over, so the map holds only recent failures. */
  #sweep(now: number): void {
    for (const [key, entry] of this.#failures) if (entry.resetAt <= now) this.#failures.delete(key);
  }
}
