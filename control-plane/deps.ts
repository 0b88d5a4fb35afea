// What every service function receives: its dependencies as one typed object, no globals. This file
// names what lies below every part (the config, the metadata, the blobs, the runtime, the clock); a
// part that adds its own (a cache, the host router, the logs, the site databases) declares its fields
// in its own folder (`declare module '…/deps.ts'`), so no arrow runs from here up to a part.
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { HotSql } from './db/hot-sql.ts';
import type { ChangeFeed } from './db/changes.ts';
import type { Db, Metadata } from './db/metadata.ts';
import type { CachingBlobStore } from '../storage/blob-store.ts';
import type { RuntimeHost } from '../runtime-host/runtime.ts';
import type { Metrics } from './metrics.ts';

export interface Deps {
  config: Config;
  /** The metadata database as opened: whether it is shared by several servers, its rate limiters, its counts. */
  metadata: Metadata;
  db: Db;
  /** The statements every request runs, prepared once; the rest goes through `db`. */
  hotSql: HotSql;
  /** File bytes and exports: the blob directory or the object store, behind a cache of small blobs. */
  blobs: CachingBlobStore;
  log: Logger;
  /** Where a service says what it changed, once committed, so every server's caches forget it. */
  changes: ChangeFeed;
  runtime: RuntimeHost;
  /** Disposable runtime files (generated entries, sockets, Deno's cache). */
  runtimeDir: string;
  /** Encrypts secrets at rest and signs session tokens; from BERTH_MASTER_KEY_FILE. */
  masterKey: Buffer;
  now: () => Date;
  /**
   * This server among the nodes sharing the metadata: BERTH_NODE_ID, or its host and a digest of its
   * data dir, the same across its restarts. Work in flight and site database placements are marked
   * with it, so a start cleans up only what its own past left.
   */
  nodeId: string;
  /** What /metrics reports. */
  metrics: Metrics;
  /** Public address of a hosted site, e.g. http://blog.localhost:8080/ (known once the port is bound). */
  siteUrl: (subdomain: string) => string;
}

/** The slice of Deps that operator commands have when no server is running. */
export type Store = Pick<Deps, 'db' | 'now'>;

export type Permission = 'READ' | 'WRITE';

/** A member's role in an account: ADMIN may do everything, MEMBER all but keys, members and exports. */
export type Role = 'ADMIN' | 'MEMBER';

/**
 * Who a service acts for: an API key (`key`), a function of a site (`function`), a signed-in user of
 * the dashboard (`session`) or the CLI's own credential (`cli`). Services scope everything to
 * `accountId`; `id` is what audit logs record.
 */
export interface Actor {
  via: 'key' | 'function' | 'session' | 'cli';
  accountId: string;
  permission: Permission;
  /** The key's id, `function:<functionId>`, `user:<userId>`: recorded by audit logs. */
  id: string;
  /** For a signed-in user: who, their role in `accountId`, and the session (its token's digest). */
  user?: { id: string; email: string; role: Role; sessionHash: string };
}

/**
 * A clock that never repeats or goes back within this process, so "newest first" orderings by
 * timestamp are exact even for writes in the same millisecond.
 */
export function monotonicClock(): () => Date {
  let last = 0;
  return () => {
    last = Math.max(Date.now(), last + 1);
    return new Date(last);
  };
}

export const newId = (): string => crypto.randomUUID();

export const timestamp = (deps: Pick<Deps, 'now'>): string => deps.now().toISOString();
