// The composition root: the parts of Berth in the order they open (part.ts says what a part is), and
// the one way every start runs them: each part opens, given what the parts before it added to Deps;
// with every part open, each subscribes its change-feed listeners, then starts its work and jobs.
// Everything opened is released in the reverse order (close-stack.ts), on a failed start too. The HTTP
// server (server.ts) and the tests start from here; nothing else constructs a part.
import { analyticsPart } from './analytics/part.ts';
import { blobsPart, sweeperPart } from './blob-stores.ts';
import { buildsPart } from './builds/part.ts';
import { CloseStack } from './close-stack.ts';
import type { Config } from './config.ts';
import { type Deps, monotonicClock } from './deps.ts';
import { databaseBranchesPart } from './database-branches/part.ts';
import { deploymentsPart } from './deployments/part.ts';
import { domainsPart } from './domains/part.ts';
import type { Logger } from './log.ts';
import { logsPart } from './logs/part.ts';
import type { Opening, Part, PartListener } from './part.ts';
import { dataDirPart } from './parts/data-dir.ts';
import { metadataPart } from './parts/metadata.ts';
import { metricsPart } from './parts/metrics.ts';
import { runtimePart } from './parts/runtime.ts';
import { ServicesPart } from './parts/services.ts';
import type { OwnerCredentials } from './services/bootstrap.ts';
import type { CronScheduler } from './services/cron.ts';
import { siteDatabasesPart } from './site-databases/part.ts';
import { dataDirProblem, findDeno } from './startup-error.ts';
import { tlsPart } from './tls/part.ts';
import { openPrivateDataDir } from '../storage/data-dir-privacy.ts';
import type http from 'node:http';

export interface ComposeOptions {
  log: Logger;
  /** The clock of schedules and timestamps; tests drive cron with their own. */
  now?: (() => Date) | undefined;
  /** How much lower function workers' CPU priority is than the server's (default 10); benches compare with 0. */
  workerNice?: number | undefined;
  /** The public address of a hosted site, known once the server has bound its port. */
  siteUrl: (subdomain: string) => string;
}

export interface Composed {
  deps: Deps;
  /** Set when this start created the owner account of an empty data dir. */
  owner: OwnerCredentials | null;
  scheduler: CronScheduler;
  /** The listeners the parts serve beside the main one, given its request handler; not yet listening. */
  listeners(handle: http.RequestListener): PartListener[];
  /** Where the server registers the close of each listener it binds, released before every part. */
  stack: CloseStack;
  /** Releases every part in the reverse order of their opening, the data dir's lock last. */
  close(): Promise<void>;
}

export async function compose(config: Config, options: ComposeOptions): Promise<Composed> {
  const { log } = options;
  // Found before anything is opened: nothing to release when it is missing.
  const denoPath = findDeno(config.denoPath);
  let tightened: number;
  try {
    tightened = await openPrivateDataDir(config.dataDir);
  } catch (err) {
    throw dataDirProblem(err, config.dataDir);
  }
  if (tightened > 0)
    log.warn({ entries: tightened, dataDir: config.dataDir }, 'tightened the permissions of the data dir');

  const services = new ServicesPart();
  const parts: Part[] = [
    dataDirPart,
    blobsPart,
    metadataPart,
    metricsPart,
    logsPart,
    analyticsPart,
    siteDatabasesPart(),
    runtimePart,
    buildsPart,
    services,
    domainsPart,
    deploymentsPart,
    databaseBranchesPart,
    sweeperPart,
    tlsPart(),
  ];
  const stack = new CloseStack();
  const testClock = options.now !== undefined;
  const opening: Opening = { config, log, denoPath, testClock, workerNice: options.workerNice, stack };
  try {
    const adding: Partial<Deps> = { config, log, now: options.now ?? monotonicClock(), siteUrl: options.siteUrl };
    for (const part of parts) Object.assign(adding, await part.open?.(adding, opening));
    // Every field of Deps is added by the start or by one part above; a part reads them from here on.
    const deps = adding as Deps;
    for (const part of parts) for (const listener of part.listens?.(deps) ?? []) deps.changes.subscribe(listener);
    for (const part of parts) await part.start?.(deps, stack);
    return {
      deps,
      owner: services.owner,
      scheduler: services.scheduler,
      listeners: (handle) => parts.flatMap((part) => part.serves?.(deps, handle) ?? []),
      stack,
      close: () => stack.close(),
    };
  } catch (err) {
    // Whatever the start had opened is released, the data dir's lock last, before the failure is reported.
    await stack.close().catch((closeErr: unknown) => log.error({ err: closeErr }, 'releasing a failed start failed'));
    throw err;
  }
}
