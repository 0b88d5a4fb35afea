// Builds and npm packages no site holds (builds/build-charges.ts) are forgotten once none has been made
// or used for a sweep's age (BERTH_BLOB_SWEEP_MS): their blobs are then the sweeper's. A build reusing
// one marks it used first (builds.ts, package-store.ts): the deletion, which checks the mark in the
// same statement, either goes first, and the build finds nothing and makes it again, or leaves it.
import { logJobFailure } from '../db/errors.ts';
import type { Deps } from '../deps.ts';

/** Forgets the builds and packages unused since `before` that no site holds; how many of each. */
export async function forgetUnusedBuilds(
  deps: Pick<Deps, 'hotSql'>,
  before: string,
): Promise<{ builds: number; packages: number }> {
  return deps.hotSql.write(async (sql) => ({
    builds: (
      await sql.run(
        'DELETE FROM builds WHERE used_at < ? AND NOT EXISTS (SELECT 1 FROM site_build_blobs s WHERE s.sha256 = builds.module_sha256)',
        before,
      )
    ).changes,
    packages: (
      await sql.run(
        'DELETE FROM npm_packages WHERE used_at < ? AND NOT EXISTS (SELECT 1 FROM site_build_blobs s WHERE s.sha256 = npm_packages.tarball_sha256)',
        before,
      )
    ).changes,
  }));
}

/** Every node forgets unused builds every BERTH_BLOB_SWEEP_MS (never when it is 0). */
export class UnusedBuilds {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(private readonly deps: Pick<Deps, 'hotSql' | 'log' | 'config' | 'now'>) {}

  start(): void {
    const every = this.deps.config.blobSweepMs;
    if (every === 0) return;
    this.#timer = setInterval(() => {
      this.#running ??= this.#round(every).finally(() => {
        this.#running = undefined;
      });
    }, every);
    this.#timer.unref();
  }

  async #round(unusedMs: number): Promise<void> {
    try {
      const forgotten = await forgetUnusedBuilds(
        this.deps,
        new Date(this.deps.now().getTime() - unusedMs).toISOString(),
      );
      if (forgotten.builds > 0 || forgotten.packages > 0)
        this.deps.log.info(forgotten, 'forgot builds and npm packages no site holds');
    } catch (err) {
      logJobFailure(this.deps.log, err, 'forgetting builds no site holds failed');
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }
}
