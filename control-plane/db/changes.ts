// The change feed: how every server of an instance learns that something it may have cached changed.
// A service publishes a change once its transaction has committed, or with the transaction itself;
// the publishing process applies it to its own caches once committed (so it reads its own writes), and
// every other process within a moment through PostgreSQL's LISTEN/NOTIFY on one channel
// (postgres/changes.ts). Whenever changes may have been missed (the listening connection was lost),
// subscribers are told to resync: to forget everything they cached. On SQLite the feed stays in the
// process (LocalChangeFeed): one server owns meta.sqlite, by the data dir's lock, so no other process
// caches what it changes.
import type { HotTx } from './hot-sql.ts';

/** What changed; subscribers forget what they cached about it. */
export type Change =
  | { kind: 'file'; bucketId: string; path: string }
  /** A site created, archived, made PRIVATE, deleted or renamed (lookups of any site may name it). */
  | { kind: 'sites'; siteId: string }
  /** A function deployed (versionId) or removed (null). */
  | { kind: 'function'; siteId: string; name: string; functionId: string; versionId: string | null }
  | { kind: 'database'; siteId: string }
  /** Any custom domain: added, verified, lapsed, made canonical, removed. */
  | { kind: 'domains' }
  /** A certificate stored for the name (BERTH_TLS=acme): issued or renewed. */
  | { kind: 'certificate'; hostname: string }
  /** Many files of a bucket at once (a deployment published, promoted or restored): forget them all. */
  | { kind: 'bucket'; bucketId: string; siteId: string }
  /** Function log lines of the site stored (one per flush, not per line): live log streams read them. */
  | { kind: 'logs'; siteId: string }
  /** What the site's past shows changed: a preview's access or secrets, a version purged from its history. */
  | { kind: 'history'; siteId: string }
  /** A key revoked, sessions ended or a member removed: live log streams check their credential again. */
  | { kind: 'credentials' };

export interface ChangeListener {
  change(change: Change): void;
  /** Changes may have been missed: forget everything. */
  resync(): void;
}

export interface ChangeFeed {
  /** Applies the change here, then tells the other processes; resolves once it is sent. */
  publish(change: Change): Promise<void>;
  /**
   * Publishes the change with the write `tx`: the other processes hear of it when it commits, never if
   * it rolls back (PostgreSQL delivers a NOTIFY sent in a transaction at its commit), and this process
   * applies it once committed, before the write resolves. A write that cannot tell does not commit.
   */
  publishWith(tx: HotTx, change: Change): void;
  subscribe(listener: ChangeListener): void;
  close(): Promise<void>;
}

/** Applies changes to this process's listeners: the part of every feed that stays in one process. */
export class LocalChanges {
  readonly #listeners: ChangeListener[] = [];

  subscribe(listener: ChangeListener): void {
    this.#listeners.push(listener);
  }

  apply(change: Change): void {
    for (const listener of this.#listeners) listener.change(change);
  }

  resync(): void {
    for (const listener of this.#listeners) listener.resync();
  }
}

/** The feed of a server that is alone with its metadata (SQLite). */
export class LocalChangeFeed implements ChangeFeed {
  readonly #local = new LocalChanges();

  async publish(change: Change): Promise<void> {
    this.#local.apply(change);
  }

  publishWith(tx: HotTx, change: Change): void {
    tx.afterCommit(() => this.#local.apply(change));
  }

  subscribe(listener: ChangeListener): void {
    this.#local.subscribe(listener);
  }

  async close(): Promise<void> {}
}

/** A published change's shape, checked before it is applied: a NOTIFY payload is only text. */
export function parseChange(value: unknown): Change | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const c = value as Record<string, unknown>;
  const text = (key: string) => typeof c[key] === 'string';
  switch (c.kind) {
    case 'file':
      return text('bucketId') && text('path')
        ? { kind: 'file', bucketId: c.bucketId as string, path: c.path as string }
        : undefined;
    case 'sites':
      return text('siteId') ? { kind: 'sites', siteId: c.siteId as string } : undefined;
    case 'domains':
      return { kind: 'domains' };
    case 'credentials':
      return { kind: 'credentials' };
    case 'bucket':
      return text('bucketId') && text('siteId')
        ? { kind: 'bucket', bucketId: c.bucketId as string, siteId: c.siteId as string }
        : undefined;
    case 'function':
      return text('siteId') && text('name') && text('functionId') && (c.versionId === null || text('versionId'))
        ? {
            kind: 'function',
            siteId: c.siteId as string,
            name: c.name as string,
            functionId: c.functionId as string,
            versionId: c.versionId as string | null,
          }
        : undefined;
    case 'certificate':
      return text('hostname') ? { kind: 'certificate', hostname: c.hostname as string } : undefined;
    case 'database':
      return text('siteId') ? { kind: 'database', siteId: c.siteId as string } : undefined;
    case 'logs':
      return text('siteId') ? { kind: 'logs', siteId: c.siteId as string } : undefined;
    case 'history':
      return text('siteId') ? { kind: 'history', siteId: c.siteId as string } : undefined;
    default:
      return undefined;
  }
}
