// The hot statements on PostgreSQL (see ../hot-sql.ts): each SQL text becomes a named prepared
// statement, parsed and described once per pooled connection. A write transaction runs on one
// connection at PostgreSQL's default READ COMMITTED; rows it reads to change are locked with FOR UPDATE
// (or by the upsert that meets them), always in the same order (a site, a file, a blob of the account,
// the account), so two writers take turns and never deadlock. A commit returns once PostgreSQL has made
// it durable.
//
// What a transaction sends together leaves as one flight (flight.ts), answered in one round trip: its
// BEGIN with its first statements, a batch, the statements left for the commit with the COMMIT.
// PostgreSQL still runs each statement on its own, in order, each with a snapshot taken when it starts:
// one after a lock sees what the lock's last holder committed.
import crypto from 'node:crypto';
import type pg from 'pg';
import {
  type HotSql,
  type HotTx,
  type Param,
  type Statement,
  type StatementResult,
  checkColumnsNamed,
} from '../hot-sql.ts';
import { type FlightResult, type FlightStatement, sendFlight } from './flight.ts';

class Statements {
  readonly #prepared = new Map<string, Omit<FlightStatement, 'values'>>();

  /** The statement for a SQL text: `?` placeholders numbered as `$1, $2…`, named after its text. */
  of(sql: string, values: Param[]): FlightStatement {
    let prepared = this.#prepared.get(sql);
    if (!prepared) {
      checkColumnsNamed(sql);
      let n = 0;
      const text = sql.replace(/\?/g, () => `$${++n}`);
      prepared = { name: `berth_${crypto.createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text };
      this.#prepared.set(sql, prepared);
    }
    return { ...prepared, values };
  }
}

/** What the adapter has sent: statements (BEGIN, COMMIT and ROLLBACK included) and round trips. */
interface Counts {
  queries: number;
  roundTrips: number;
}

const NOTHING: StatementResult = Object.freeze({ rows: [], changes: 0 }) as StatementResult;

const answer = (result: FlightResult): StatementResult => ({ rows: result.rows, changes: result.rowCount });

class PostgresTx implements HotTx {
  #begun = false;
  #committed = false;
  readonly #atCommit: Statement[] = [];
  readonly #afterCommit: Array<() => void> = [];

  constructor(
    readonly client: pg.PoolClient,
    readonly types: pg.CustomTypesConfig,
    readonly statements: Statements,
    readonly counts: Counts,
  ) {}

  /** Begun and not committed: a failure must roll it back. */
  get open(): boolean {
    return this.#begun && !this.#committed;
  }

  /**
   * Sends `statements` as one flight, after BEGIN when they are the transaction's first and before
   * COMMIT when `commit`: one round trip. Rejects with the first failure, after which nothing ran.
   */
  async #flight(statements: Statement[], commit = false): Promise<StatementResult[]> {
    const begins = !this.#begun;
    const sent = [
      ...(begins ? [this.statements.of('BEGIN', [])] : []),
      ...statements.map((s) => this.statements.of(s.forUpdate ? `${s.sql} FOR UPDATE` : s.sql, s.params)),
      ...(commit ? [this.statements.of('COMMIT', [])] : []),
    ];
    this.counts.queries += sent.length;
    this.counts.roundTrips++;
    this.#begun = true;
    const results = await sendFlight(this.client, this.types, sent);
    if (commit) {
      // A transaction a failure left aborted answers COMMIT with ROLLBACK: nothing of it was kept.
      if (results.at(-1)!.command !== 'COMMIT')
        throw new Error('the transaction was rolled back at its commit: one of its statements had failed');
      this.#committed = true;
    }
    return results.slice(begins ? 1 : 0, commit ? -1 : undefined).map(answer);
  }

  async #one(s: Statement): Promise<StatementResult> {
    return (await this.#flight([s]))[0]!;
  }

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    return (await this.#one({ sql, params })).rows[0] as T | undefined;
  }

  async getForUpdate<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    return (await this.#one({ sql, params, forUpdate: true })).rows[0] as T | undefined;
  }

  async all<T>(sql: string, ...params: Param[]): Promise<T[]> {
    return (await this.#one({ sql, params })).rows as T[];
  }

  async run(sql: string, ...params: Param[]): Promise<{ changes: number }> {
    return { changes: (await this.#one({ sql, params })).changes };
  }

  async batch<K extends string>(statements: Record<K, Statement | undefined>): Promise<Record<K, StatementResult>> {
    const names = Object.keys(statements) as K[];
    const sent = names.filter((name) => statements[name] !== undefined);
    const results = sent.length > 0 ? await this.#flight(sent.map((name) => statements[name]!)) : [];
    const answers = {} as Record<K, StatementResult>;
    for (const name of names) answers[name] = NOTHING;
    sent.forEach((name, i) => {
      answers[name] = results[i]!;
    });
    return answers;
  }

  commitWith(...statements: Statement[]): void {
    this.#atCommit.push(...statements);
  }

  afterCommit(then: () => void): void {
    this.#afterCommit.push(then);
  }

  /** Sends what is left for the commit with the COMMIT; a transaction that sent nothing has nothing to commit. */
  async commit(): Promise<void> {
    if (this.#begun || this.#atCommit.length > 0) await this.#flight(this.#atCommit, true);
  }

  committed(): void {
    for (const then of this.#afterCommit) then();
  }
}

export class PostgresHotSql implements HotSql {
  readonly #statements = new Statements();
  readonly #counts: Counts = { queries: 0, roundTrips: 0 };

  constructor(
    readonly pool: pg.Pool,
    /** How values are read: the pool's own (connection.ts). */
    readonly types: pg.CustomTypesConfig,
  ) {}

  /** Statements sent, BEGIN and COMMIT included. */
  get queries(): number {
    return this.#counts.queries;
  }

  get roundTrips(): number {
    return this.#counts.roundTrips;
  }

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    this.#counts.queries++;
    this.#counts.roundTrips++;
    const client = await this.pool.connect();
    let results: FlightResult[];
    try {
      results = await sendFlight(client, this.types, [this.#statements.of(sql, params)]);
    } catch (err) {
      // As pool.query does: a connection a statement failed on is not kept.
      client.release(err as Error);
      throw err;
    }
    client.release();
    return results[0]!.rows[0] as T | undefined;
  }

  async write<T>(work: (tx: HotTx) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const tx = new PostgresTx(client, this.types, this.#statements, this.#counts);
    let broken: Error | undefined;
    let result: T;
    try {
      result = await work(tx);
      await tx.commit();
    } catch (err) {
      if (tx.open) {
        this.#counts.queries++;
        this.#counts.roundTrips++;
        await client.query('ROLLBACK').catch((rollbackFailed: Error) => {
          // A connection that cannot roll back is not given to anyone else.
          broken = rollbackFailed;
        });
      }
      throw err;
    } finally {
      client.release(broken);
    }
    tx.committed();
    return result;
  }

  async close(): Promise<void> {
    // The pool is Knex's too: whoever opened it ends it (../metadata.ts).
  }
}
