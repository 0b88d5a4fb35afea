// The hot statements on PostgreSQL (see ../hot-sql.ts): each SQL text becomes a named prepared
// statement, parsed and planned once per pooled connection. A write transaction runs on one connection
// at PostgreSQL's default READ COMMITTED; rows it reads to change are locked with FOR UPDATE, always
// in the same order (a file, then its account), so two writers take turns and never deadlock. A
// commit returns once PostgreSQL has made it durable.
import crypto from 'node:crypto';
import type pg from 'pg';
import { type HotSql, type HotTx, type Param, checkColumnsNamed } from '../hot-sql.ts';

interface Prepared {
  name: string;
  text: string;
}

class Statements {
  readonly #prepared = new Map<string, Prepared>();

  /** The statement for a SQL text: `?` placeholders numbered as `$1, $2…`, named after its text. */
  of(sql: string): Prepared {
    let prepared = this.#prepared.get(sql);
    if (!prepared) {
      checkColumnsNamed(sql);
      let n = 0;
      const text = sql.replace(/\?/g, () => `$${++n}`);
      prepared = { name: `berth_${crypto.createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text };
      this.#prepared.set(sql, prepared);
    }
    return prepared;
  }
}

class PostgresTx implements HotTx {
  constructor(
    readonly client: pg.PoolClient,
    readonly statements: Statements,
    readonly counted: () => void,
  ) {}

  async #query<T>(sql: string, params: Param[]): Promise<pg.QueryResult<T & pg.QueryResultRow>> {
    this.counted();
    return this.client.query<T & pg.QueryResultRow>({ ...this.statements.of(sql), values: params });
  }

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    return (await this.#query<T>(sql, params)).rows[0];
  }

  async getForUpdate<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    return (await this.#query<T>(`${sql} FOR UPDATE`, params)).rows[0];
  }

  async all<T>(sql: string, ...params: Param[]): Promise<T[]> {
    return (await this.#query<T>(sql, params)).rows;
  }

  async run(sql: string, ...params: Param[]): Promise<{ changes: number }> {
    return { changes: (await this.#query(sql, params)).rowCount ?? 0 };
  }
}

export class PostgresHotSql implements HotSql {
  readonly #statements = new Statements();
  /** Statements sent, BEGIN and COMMIT included. */
  queries = 0;

  constructor(readonly pool: pg.Pool) {}

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    this.queries++;
    const result = await this.pool.query<T & pg.QueryResultRow>({ ...this.#statements.of(sql), values: params });
    return result.rows[0];
  }

  async write<T>(work: (tx: HotTx) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      this.queries += 2;
      await client.query('BEGIN');
      try {
        const result = await work(new PostgresTx(client, this.#statements, () => this.queries++));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch((rollbackFailed: Error) => {
          // A connection that cannot roll back is not given to anyone else.
          broken = rollbackFailed;
        });
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    // The pool is Knex's too: whoever opened it ends it (../metadata.ts).
  }
}
