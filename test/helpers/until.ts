// Waiting in tests for something the server does in the background.
import { setTimeout as sleep } from 'node:timers/promises';

export interface UntilOptions {
  /** How long to keep checking, from the first check (default 30 s: generous on a loaded machine). */
  ms?: number;
  /** The pause between two checks (default 50 ms). */
  every?: number;
}

/**
 * Polls until `check` gives a truthy value, and returns it; a falsy one means "not yet". Fails the test
 * with `what` once the deadline has passed, however long each check takes.
 */
export async function until<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  { ms = 30_000, every = 50 }: UntilOptions = {},
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${ms} ms)`);
    await sleep(every);
  }
}
