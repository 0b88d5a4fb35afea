// Waiting in tests for something the server does in the background.
import { setTimeout as sleep } from 'node:timers/promises';

/** Polls until `check` holds; fails the test with `what` if it never does. */
export async function until<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await check();
    if (value) return value;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
