// The periodic look at ACTIVE custom domains' TXT records (recheckDomains): every node runs it, and
// each due domain is looked up by one of them.
import { logJobFailure } from '../db/errors.ts';
import type { Deps } from '../deps.ts';
import { recheckDomains } from './domains.ts';

/** The most time between two rounds, whatever the check interval: due domains are not left waiting. */
const MAX_TICK_MS = 60_000;

export class DomainChecks {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(private readonly deps: Deps) {}

  start(): void {
    const { domainCheckMs } = this.deps.config;
    if (domainCheckMs === 0) return;
    this.#timer = setInterval(
      () => {
        // One round at a time: a slow resolver never stacks rounds up.
        this.#running ??= this.#round().finally(() => {
          this.#running = undefined;
        });
      },
      Math.min(domainCheckMs, MAX_TICK_MS),
    );
    this.#timer.unref();
  }

  async #round(): Promise<void> {
    try {
      await recheckDomains(this.deps);
    } catch (err) {
      logJobFailure(this.deps.log, err, 'checking custom domains’ TXT records failed');
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }
}
