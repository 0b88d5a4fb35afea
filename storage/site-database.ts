// The site database provider: one SQLite file per site at <data dir>/sites/<siteId>/db.sqlite. The
// interface is what a networked SQL provider would implement too; nothing outside this file knows
// the databases are local files.
import fs from 'node:fs';
import path from 'node:path';
import sqlite3 from 'sqlite3';

export type SqlParam = string | number | boolean | null;

export interface StatementResult {
  rows: Array<Record<string, unknown>>;
  changes: number;
  lastRowId: number | null;
  durationMs: number;
}

/** A statement the database refused, with the provider's own message. */
export class StatementError extends Error {}

export interface SiteDatabaseProvider {
  /** Creates the database if it does not exist; safe to repeat. */
  create(siteId: string): Promise<void>;
  exists(siteId: string): boolean;
  /** Runs one statement. */
  run(siteId: string, sql: string, params: SqlParam[]): Promise<StatementResult>;
  /** Runs statements in one transaction: all of them or none. */
  batch(siteId: string, statements: Array<{ sql: string; params: SqlParam[] }>): Promise<StatementResult[]>;
  /**
   * Runs a migration's SQL (one or more statements) and `receipt` in one transaction, so either both
   * are committed or neither is.
   */
  migrate(siteId: string, sql: string, receipt: { sql: string; params: SqlParam[] }): Promise<void>;
  /** SQL text that rebuilds the database's schema and data in an empty database. */
  dump(siteId: string): Promise<string>;
  remove(siteId: string): Promise<void>;
  close(): Promise<void>;
}

/** One open database and a queue that gives each operation the connection to itself. */
class Handle {
  #queue: Promise<unknown> = Promise.resolve();
  /** total_changes() after the last statement: only this handle writes the file, so it stays true. */
  totalChanges: number | null = null;
  constructor(readonly db: sqlite3.Database) {}

  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(work, work);
    this.#queue = next.catch(() => {});
    return next;
  }
}

const call = <T>(fn: (cb: (err: Error | null, value: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));

export class SqliteSiteDatabases implements SiteDatabaseProvider {
  readonly #root: string;
  readonly #handles = new Map<string, Promise<Handle>>();

  constructor(dataDir: string) {
    this.#root = path.join(dataDir, 'sites');
  }

  #file(siteId: string): string {
    if (!/^[0-9a-f-]{36}$/.test(siteId)) throw new Error(`not a site id: ${siteId}`);
    return path.join(this.#root, siteId, 'db.sqlite');
  }

  exists(siteId: string): boolean {
    return fs.existsSync(this.#file(siteId));
  }

  async create(siteId: string): Promise<void> {
    fs.mkdirSync(path.dirname(this.#file(siteId)), { recursive: true });
    await this.#open(siteId, true);
  }

  #open(siteId: string, create = false): Promise<Handle> {
    let handle = this.#handles.get(siteId);
    if (!handle) {
      const file = this.#file(siteId);
      if (!create && !fs.existsSync(file)) return Promise.reject(new Error(`no database for site ${siteId}`));
      handle = (async () => {
        const db = await call<sqlite3.Database>((cb) => {
          const opened: sqlite3.Database = new sqlite3.Database(file, (err) => cb(err, opened));
        });
        await call((cb) => db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;', (err) => cb(err, undefined)));
        return new Handle(db);
      })();
      this.#handles.set(siteId, handle);
      handle.catch(() => this.#handles.delete(siteId));
    }
    return handle;
  }

  async run(siteId: string, sql: string, params: SqlParam[]): Promise<StatementResult> {
    const handle = await this.#open(siteId);
    return handle.exclusive(() => this.#statement(handle, sql, params));
  }

  async batch(siteId: string, statements: Array<{ sql: string; params: SqlParam[] }>): Promise<StatementResult[]> {
    const handle = await this.#open(siteId);
    return handle.exclusive(async () => {
      await call((cb) => handle.db.exec('BEGIN IMMEDIATE', (err) => cb(err, undefined)));
      try {
        const results: StatementResult[] = [];
        for (const s of statements) results.push(await this.#statement(handle, s.sql, s.params));
        await call((cb) => handle.db.exec('COMMIT', (err) => cb(err, undefined)));
        return results;
      } catch (err) {
        await call((cb) => handle.db.exec('ROLLBACK', (e) => cb(e, undefined))).catch(() => {});
        handle.totalChanges = null;
        throw err;
      }
    });
  }

  async migrate(siteId: string, sql: string, receipt: { sql: string; params: SqlParam[] }): Promise<void> {
    const handle = await this.#open(siteId);
    await handle.exclusive(async () => {
      // The migration's own changes are not counted here: the next statement reads the total afresh.
      handle.totalChanges = null;
      const exec = (text: string) => call((cb) => handle.db.exec(text, (err) => cb(err, undefined)));
      await exec('BEGIN IMMEDIATE');
      try {
        await exec(sql).catch((err: Error) => {
          throw new StatementError(err.message.replace(/^SQLITE_\w+: /, ''));
        });
        await call((cb) => handle.db.run(receipt.sql, receipt.params, (err) => cb(err, undefined)));
        await exec('COMMIT');
      } catch (err) {
        await exec('ROLLBACK').catch(() => {});
        throw err;
      }
    });
  }

  async dump(siteId: string): Promise<string> {
    const handle = await this.#open(siteId);
    return handle.exclusive(async () => {
      const all = (sql: string) => call<Array<Record<string, unknown>>>((cb) => handle.db.all(sql, (err, rows) => cb(err, rows as Array<Record<string, unknown>>)));
      const objects = (await all(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, rowid",
      )) as Array<{ type: string; name: string; sql: string }>;
      const lines = ['PRAGMA foreign_keys = OFF;', 'BEGIN TRANSACTION;'];
      const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;
      for (const table of objects.filter((o) => o.type === 'table')) {
        lines.push(`${table.sql};`);
        const columns = (await all(`PRAGMA table_info(${ident(table.name)})`)).map((c) => ident(String(c.name)));
        if (columns.length === 0) continue;
        // quote() renders each value as an exact SQL literal: integers past 2^53, reals and blobs included.
        const rows = await all(`SELECT ${columns.map((c) => `quote(${c})`).join(" || ',' || ")} AS v FROM ${ident(table.name)}`);
        for (const row of rows) lines.push(`INSERT INTO ${ident(table.name)} (${columns.join(', ')}) VALUES (${String(row.v)});`);
      }
      for (const other of objects.filter((o) => o.type !== 'table')) lines.push(`${other.sql};`);
      lines.push('COMMIT;', '');
      return lines.join('\n');
    });
  }

  async #statement(handle: Handle, sql: string, params: SqlParam[]): Promise<StatementResult> {
    const { db } = handle;
    const started = performance.now();
    // A plain SELECT changes nothing: one round trip instead of two.
    if (/^\s*select\b/i.test(sql)) return { rows: await this.#rows(handle, sql, params), changes: 0, lastRowId: null, durationMs: performance.now() - started };
    handle.totalChanges ??= (await call<{ n: number }>((cb) => db.get('SELECT total_changes() AS n', (err, row) => cb(err, row as { n: number })))).n;
    const before = handle.totalChanges;
    const rows = await this.#rows(handle, sql, params);
    const after = await call<{ n: number; id: number }>((cb) => db.get('SELECT total_changes() AS n, last_insert_rowid() AS id', (err, row) => cb(err, row as { n: number; id: number })));
    handle.totalChanges = after.n;
    const changes = after.n - before;
    return { rows, changes, lastRowId: changes > 0 ? after.id : null, durationMs: performance.now() - started };
  }

  async #rows(handle: Handle, sql: string, params: SqlParam[]): Promise<Array<Record<string, unknown>>> {
    let rows: Array<Record<string, unknown>>;
    try {
      rows = await call((cb) => handle.db.all(sql, params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p)), (err, r) => cb(err, r as Array<Record<string, unknown>>)));
    } catch (err) {
      handle.totalChanges = null;
      throw new StatementError((err as Error).message.replace(/^SQLITE_\w+: /, ''));
    }
    // node-sqlite3 reads integers as doubles: refuse what it could not represent exactly.
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
          throw new StatementError(`column "${column}" holds an integer beyond 2^53 that would lose precision; select it with CAST(${column} AS TEXT)`);
        }
      }
    }
    return rows;
  }

  async remove(siteId: string): Promise<void> {
    const handle = this.#handles.get(siteId);
    this.#handles.delete(siteId);
    if (handle) {
      const h = await handle.catch(() => null);
      if (h) await h.exclusive(() => call((cb) => h.db.close((err) => cb(err, undefined))));
    }
    fs.rmSync(path.dirname(this.#file(siteId)), { recursive: true, force: true });
  }

  async close(): Promise<void> {
    const handles = [...this.#handles.values()];
    this.#handles.clear();
    for (const handle of handles) {
      const h = await handle.catch(() => null);
      if (h) await h.exclusive(() => call((cb) => h.db.close((err) => cb(err, undefined))));
    }
  }
}
