// The periodic expiry of deployments left UPLOADING past their day (expireOpenDeployments): every node
// runs it, and each due deployment is expired by one of them. A deployment's uploads are charged to its
// account, so they are given back on time whether or not anyone touches the site again.
import { logJobFailure } from '../db/errors.ts';
import { expireOpenDeployments } from './deployments.ts';
import type { Deps } from './deps.ts';

export class DeploymentExpiry {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(private readonly deps: Deps) {}

  start(): void {
    this.#timer = setInterval(() => {
      // One round at a time: a slow metadata never stacks rounds up.
      this.#running ??= this.#round().finally(() => {
        this.#running = undefined;
      });
    }, this.deps.config.deploymentExpiryCheckMs);
    this.#timer.unref();
  }

  async #round(): Promise<void> {
    try {
      const expired = await expireOpenDeployments(this.deps);
      if (expired > 0) this.deps.log.info({ deployments: expired }, 'expired deployments not published within a day');
    } catch (err) {
      logJobFailure(this.deps.log, err, 'expiring deployments not published within a day failed');
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }
}
