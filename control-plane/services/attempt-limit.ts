// Counts failed attempts per key (an email, an address) in a fixed window, so guessing passwords is
// slow for one account and for one client alike. The counts live in the metadata (`attempt_limits`),
// kept by rate-limiter-flexible's store for the backend, so every server of an instance counts
// against the same limit and a restart forgets nothing.
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Metadata } from '../db/metadata.ts';

declare module '../deps.ts' {
  interface Deps {
    /** Failed sign-ins per email and per client address. */
    signInLimits: { email: AttemptLimit; address: AttemptLimit };
    /** CLI login requests started per client address: anyone may start one, nobody may flood them. */
    cliLoginLimit: AttemptLimit;
  }
}

const TABLE = 'attempt_limits';
/** Windows that ended are deleted at most this often, by the next failure. */
const CLEAR_EVERY_MS = 5 * 60_000;

export class AttemptLimit {
  readonly #limiter: RateLimiterAbstract;
  readonly #max: number;
  #clearedAt = Date.now();

  /** `name` keeps this limit's keys apart from other limits' in the one table. */
  constructor(metadata: Pick<Metadata, 'rateLimiter'>, name: string, max: number, windowMs: number) {
    this.#max = max;
    this.#limiter = metadata.rateLimiter({
      tableName: TABLE,
      tableCreated: true,
      keyPrefix: name,
      points: max,
      duration: windowMs / 1000,
      // The stores' own timer would outlive a closed instance; failures clear instead (see fail).
      clearExpiredByTimeout: false,
    });
  }

  /** Seconds until `key` may try again, or 0 when it may now. */
  async retryAfter(key: string): Promise<number> {
    const res = await this.#limiter.get(key);
    if (!res || res.consumedPoints < this.#max || res.msBeforeNext <= 0) return 0;
    return Math.ceil(res.msBeforeNext / 1000);
  }

  async fail(key: string): Promise<void> {
    await this.#limiter.penalty(key, 1);
    const now = Date.now();
    if (now - this.#clearedAt > CLEAR_EVERY_MS) {
      this.#clearedAt = now;
      await (this.#limiter as RateLimiterAbstract & { clearExpired(before: number): Promise<unknown> }).clearExpired(
        now,
      );
    }
  }

  async clear(key: string): Promise<void> {
    await this.#limiter.delete(key);
  }
}
