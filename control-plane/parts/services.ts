// The services' part of a start: what they keep in memory (the hosting cache, following the change
// feed; the uploads in flight against each account's storage limit; the sign-in and CLI login limits,
// in the metadata so every server counts the same), then, with every part open, what a previous
// process left half-done (exports, migration leases) settled, the first run's owner account created,
// and the cron scheduler started. Its code is services/; the folder holds services only.
import type { Deps } from '../deps.ts';
import { type Opening, opened, type Part } from '../part.ts';
import type { CloseStack } from '../close-stack.ts';
import { type OwnerCredentials, ensureOwner } from '../services/bootstrap.ts';
import { cliLoginLimit } from '../services/cli-logins.ts';
import { CronScheduler } from '../services/cron.ts';
import { failInterruptedExports } from '../services/exports.ts';
import { HostingCache } from '../services/hosting-cache.ts';
import { releaseLeftoverLeases } from '../services/migrations.ts';
import { signInLimits } from '../services/sessions.ts';
import { StorageQuota } from '../services/storage-quota.ts';

export class ServicesPart implements Part {
  readonly name = 'the services';
  /** Set when this start created the owner account of an empty data dir. */
  owner: OwnerCredentials | null = null;
  #scheduler: CronScheduler | undefined;

  /** Runs due cron jobs; ticks by itself every BERTH_CRON_TICK_MS once started. */
  get scheduler(): CronScheduler {
    if (!this.#scheduler) throw new Error('the cron scheduler is made when the services start');
    return this.#scheduler;
  }

  open(deps: Partial<Deps>, { config }: Opening): Partial<Deps> {
    const { metadata, hotSql } = opened(deps, this.name, 'metadata', 'hotSql');
    return {
      hostingCache: new HostingCache(),
      storageQuota: new StorageQuota(config, hotSql),
      signInLimits: signInLimits(metadata),
      cliLoginLimit: cliLoginLimit(metadata),
    };
  }

  listens(deps: Deps) {
    return [deps.hostingCache];
  }

  async start(deps: Deps, stack: CloseStack): Promise<void> {
    this.owner = await ensureOwner(deps, { email: deps.config.ownerEmail });
    await failInterruptedExports(deps);
    await releaseLeftoverLeases(deps);
    this.#scheduler = new CronScheduler(deps);
    await this.#scheduler.start(deps.config.cronTickMs);
    const scheduler = this.#scheduler;
    stack.defer('the cron scheduler', () => scheduler.stop());
  }
}
