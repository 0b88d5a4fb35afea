// Renews the certificates due for it (certificate-store.ts says when) every BERTH_TLS_RENEW_CHECK_MS, on
// every node: the names' leases make one node order each, and a name's back-off holds after a failed
// renewal, while its old certificate goes on serving until it ends (/readyz and metrics show it).
// A name no longer served is not renewed: its certificate ends, and is then removed.
import { logJobFailure } from '../db/errors.ts';
import type { Deps } from '../deps.ts';
import { servesName } from '../domains/served-names.ts';
import { dueForRenewal, removeEnded } from './certificate-store.ts';
import { removeLeftoverChallenges } from './challenges.ts';
import type { Orderer } from './orderer.ts';

export class Renewals {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | null = null;
  #stopped = false;

  constructor(
    private readonly deps: Deps,
    private readonly orderer: Orderer,
  ) {}

  start(everyMs: number): void {
    this.#timer = setInterval(() => void this.run(), everyMs).unref();
  }

  /** One pass over the certificates due; a pass still running is not doubled. */
  run(): Promise<void> {
    this.#running ??= this.#pass()
      .catch((err: unknown) => logJobFailure(this.deps.log, err, 'renewing certificates failed'))
      .finally(() => {
        this.#running = null;
      });
    return this.#running;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running;
  }

  async #pass(): Promise<void> {
    await removeLeftoverChallenges(this.deps);
    await removeEnded(this.deps);
    for (const hostname of await dueForRenewal(this.deps)) {
      if (this.#stopped) return;
      if (await servesName(this.deps, hostname)) await this.orderer.obtain(hostname);
    }
  }
}
