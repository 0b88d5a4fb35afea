// Cron jobs: the scheduler that runs each cron/<name>.ts of an active site at its UTC times, in the
// same sandbox and with the same ctx as functions, and the record of their runs.
//
// Each tick looks for the newest scheduled time at or before now that a job has not reached yet. Its
// claim (cron_last_scheduled_at) is committed with the run's row before the run starts, under a lock
// on the job's row, so neither a restart nor another server sharing the metadata ever runs one
// scheduled time twice. Times missed while the servers were down, or the site archived, are coalesced
// into one run at the next tick. A job still running (on any server) at its next time is not started
// again: that time is recorded as SKIPPED.
import { CronExpressionParser } from 'cron-parser';
import type { Actor, Deps } from '../deps.ts';
import { newId, timestamp } from '../deps.ts';
import { type FunctionRow, servedVersion } from './functions.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { requireSite } from './site-rows.ts';
import { normalizeFilePath } from './paths.ts';
import { WorkerError } from '../../runtime-host/worker.ts';
import { lockRows } from '../db/locks.ts';
import { leftByThisNode } from '../db/node-work.ts';
import { logJobFailure } from '../db/errors.ts';

type Outcome = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'SKIPPED';

interface CronRunRow {
  id: string;
  site_id: string;
  function_id: string;
  path: string;
  scheduled_at: string;
  started_at: string | null;
  ended_at: string | null;
  outcome: Outcome;
  error: string | null;
}

/** The newest time `schedule` fires at or before `now`. */
function latestAtOrBefore(schedule: string, now: Date): Date {
  return CronExpressionParser.parse(schedule, { currentDate: new Date(now.getTime() + 1), tz: 'UTC' })
    .prev()
    .toDate();
}

export class CronScheduler {
  readonly #deps: Deps;
  /** Jobs with a run in progress, and the runs themselves. */
  readonly #running = new Set<string>();
  readonly #runs = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #claiming: Promise<unknown> = Promise.resolve();

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  /**
   * Marks runs cut short by this node's previous process, and any server's runs older than a run can
   * last (their server is gone), then ticks every `everyMs` (0: only on demand).
   */
  async start(everyMs: number): Promise<void> {
    const interrupted = {
      outcome: 'FAILED',
      ended_at: timestamp(this.#deps),
      error: 'interrupted: the server stopped during the run',
    };
    await leftByThisNode(this.#deps.db, 'cron_runs', this.#deps.nodeId)
      .where({ outcome: 'RUNNING' })
      .update(interrupted);
    await this.#deps
      .db('cron_runs')
      .where({ outcome: 'RUNNING' })
      .andWhere('started_at', '<', this.#longestRunStart())
      .update(interrupted);
    if (everyMs > 0) {
      // A failed tick is logged once, where the claim failed; the next tick tries again.
      this.#timer = setInterval(() => this.tick().catch(() => {}), everyMs);
      this.#timer.unref();
    }
  }

  /** Stops ticking and waits for runs in progress (each bounded by the function timeout). */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#claiming;
    await Promise.allSettled(this.#runs);
  }

  /** Starts every run that is due now; resolves when those runs have finished. */
  async tick(): Promise<void> {
    // Claims happen one tick at a time, so two ticks never claim the same scheduled time.
    const claimed = this.#claiming.then(() => this.#claimDueRuns());
    this.#claiming = claimed.then(
      () => {},
      (err: unknown) => logJobFailure(this.#deps.log, err, 'cron tick failed'),
    );
    await Promise.all(await claimed);
  }

  /** Runs started before this are over, whichever server ran them: a run is stopped at the function timeout. */
  #longestRunStart(): string {
    return new Date(this.#deps.now().getTime() - this.#deps.config.functionTimeoutMs - 60_000).toISOString();
  }

  async #claimDueRuns(): Promise<Promise<void>[]> {
    const deps = this.#deps;
    const now = deps.now();
    const jobs = (await deps
      .db('functions')
      .join('sites', 'sites.id', 'functions.site_id')
      .where({ 'functions.kind': 'cron', 'sites.status': 'ACTIVE' })
      .whereNotNull('functions.deployed_version_id')
      .select('functions.*', 'sites.subdomain')) as Array<FunctionRow & { subdomain: string }>;
    const runs: Promise<void>[] = [];
    for (const job of jobs) {
      const due = latestAtOrBefore(job.schedule!, now);
      const claimed = job.cron_last_scheduled_at ? new Date(job.cron_last_scheduled_at) : new Date(0);
      if (due <= claimed) continue;
      const scheduledAt = due.toISOString();
      const id = newId();
      let skipped = this.#running.has(job.id);
      const claimedHere = await deps.db.transaction(async (trx) => {
        // Servers sharing the metadata take turns on the job's row; the first claims the time.
        await lockRows(trx, 'functions', { id: job.id });
        const fresh = await trx('functions').where({ id: job.id }).first('cron_last_scheduled_at');
        if (!fresh || (fresh.cron_last_scheduled_at && new Date(fresh.cron_last_scheduled_at as string) >= due))
          return false;
        skipped ||= Boolean(
          await trx('cron_runs')
            .where({ function_id: job.id, outcome: 'RUNNING' })
            .andWhere('started_at', '>=', this.#longestRunStart())
            .first('id'),
        );
        await trx('functions').where({ id: job.id }).update({ cron_last_scheduled_at: scheduledAt });
        await trx('cron_runs').insert({
          id,
          site_id: job.site_id,
          function_id: job.id,
          path: job.path,
          scheduled_at: scheduledAt,
          started_at: skipped ? null : timestamp(deps),
          ended_at: skipped ? timestamp(deps) : null,
          outcome: skipped ? 'SKIPPED' : 'RUNNING',
          error: skipped ? 'the previous run was still running' : null,
          node_id: deps.nodeId,
        } satisfies CronRunRow & { node_id: string });
        return true;
      });
      if (!claimedHere) continue;
      if (skipped) {
        deps.metrics.cronRun('SKIPPED');
        continue;
      }
      const run = this.#run(job, id, scheduledAt);
      this.#runs.add(run);
      void run.finally(() => this.#runs.delete(run));
      runs.push(run);
    }
    return runs;
  }

  async #run(job: FunctionRow & { subdomain: string }, runId: string, scheduledAt: string): Promise<void> {
    const deps = this.#deps;
    this.#running.add(job.id);
    let outcome: Outcome = 'SUCCEEDED';
    let error: string | null = null;
    try {
      const version = await servedVersion(deps, job);
      const response = await deps.runtime.invoke(version, {
        method: 'POST',
        url: `${deps.siteUrl(job.subdomain)}cron/${job.name}`,
        headers: [['berth-scheduled-time', scheduledAt]],
        body: Buffer.alloc(0),
        requestId: runId,
      });
      if (!Buffer.isBuffer(response.body)) for await (const _ of response.body) void _;
      if (response.status >= 400) {
        outcome = 'FAILED';
        error = `the handler answered ${response.status}`;
      }
    } catch (err) {
      outcome = 'FAILED';
      error = err instanceof WorkerError ? (err.failure?.message ?? err.message) : 'the job could not be started';
      if (!(err instanceof WorkerError)) deps.log.error({ err, functionId: job.id }, 'cron job failed to start');
    } finally {
      this.#running.delete(job.id);
      deps.metrics.cronRun(outcome);
    }
    try {
      await deps
        .db('cron_runs')
        .where({ id: runId })
        .update({ outcome, error, ended_at: timestamp(deps) });
    } catch (err) {
      deps.log.error({ err, runId }, 'could not record the end of a cron run');
    }
  }
}

const toRun = (row: CronRunRow) => ({
  id: row.id,
  path: row.path,
  scheduledAt: row.scheduled_at,
  startedAt: row.started_at,
  endedAt: row.ended_at,
  outcome: row.outcome,
  error: row.error,
});

export async function listCronRuns(
  deps: Deps,
  actor: Actor,
  siteId: string,
  filter: { path?: string | undefined },
  page: PageRequest,
) {
  await requireSite(deps, actor, siteId);
  const query = deps.db('cron_runs').where({ site_id: siteId });
  if (filter.path !== undefined) query.andWhere({ path: normalizeFilePath(filter.path) });
  query.orderBy([
    { column: 'scheduled_at', order: 'desc' },
    { column: 'id', order: 'desc' },
  ]);
  const { items, pagination } = await paginate(query, page, toRun);
  return { runs: items, pagination };
}
