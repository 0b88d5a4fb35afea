// The change feed on PostgreSQL: NOTIFY on one channel after a commit, or in the committing transaction
// (pg_notify, which PostgreSQL delivers when it commits), and one connection per process that LISTENs. Each process names itself in what it sends, and skips its own notifications (it has
// applied them already). A listening connection that drops is opened again (every second until it
// is back), and the process resyncs: it may have missed notifications while it was away.
import crypto from 'node:crypto';
import type pg from 'pg';
import { type Change, type ChangeFeed, type ChangeListener, LocalChanges, parseChange } from '../changes.ts';
import { type HotTx, statement } from '../hot-sql.ts';

const CHANNEL = 'berth_changes';
const RECONNECT_MS = 1000;

export class PostgresChanges implements ChangeFeed {
  readonly #local = new LocalChanges();
  readonly #origin = crypto.randomUUID();
  readonly #pool: pg.Pool;
  readonly #connect: () => pg.Client;
  readonly #onError: (err: Error) => void;
  #listener: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  /** `connect` makes the listening connection (outside the pool: it is held for the process's life). */
  constructor(pool: pg.Pool, connect: () => pg.Client, onError: (err: Error) => void) {
    this.#pool = pool;
    this.#connect = connect;
    this.#onError = onError;
  }

  /** Listens from now on; throws if the first connection cannot be made. */
  async start(): Promise<void> {
    await this.#listen();
  }

  /** Listens on a new connection; false when the feed was closed meanwhile. */
  async #listen(): Promise<boolean> {
    const client = this.#connect();
    client.on('notification', (message) => this.#received(message.payload));
    client.on('error', (err) => this.#lost(client, err));
    client.on('end', () => this.#lost(client, new Error('the listening connection ended')));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    // Closed while this connection was being made: it is not kept, or it would listen (and hold the
    // process open) for a feed nobody reads.
    if (this.#closed) {
      await client.end().catch(() => {});
      return false;
    }
    this.#listener = client;
    return true;
  }

  #received(payload: string | undefined): void {
    let message: { origin?: unknown; change?: unknown };
    try {
      message = JSON.parse(payload ?? '') as typeof message;
    } catch {
      return;
    }
    if (message.origin === this.#origin) return;
    const change = parseChange(message.change);
    if (change) this.#local.apply(change);
  }

  #lost(client: pg.Client, err: Error): void {
    if (this.#listener !== client || this.#closed) return;
    this.#listener = undefined;
    this.#onError(err);
    client.end().catch(() => {});
    this.#reconnect();
  }

  #reconnect(): void {
    this.#retry = setTimeout(() => {
      this.#listen().then(
        // Back: whatever was published meanwhile is unknown here, so nothing cached is trusted.
        (listening) => listening && this.#local.resync(),
        () => !this.#closed && this.#reconnect(),
      );
    }, RECONNECT_MS);
    this.#retry.unref();
  }

  async publish(change: Change): Promise<void> {
    this.#local.apply(change);
    await this.#pool.query('SELECT pg_notify($1, $2)', [CHANNEL, this.#payload(change)]);
  }

  publishWith(tx: HotTx, change: Change): void {
    tx.commitWith(statement('SELECT pg_notify(?, ?)', CHANNEL, this.#payload(change)));
    tx.afterCommit(() => this.#local.apply(change));
  }

  #payload(change: Change): string {
    return JSON.stringify({ origin: this.#origin, change });
  }

  subscribe(listener: ChangeListener): void {
    this.#local.subscribe(listener);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    await this.#listener?.end().catch(() => {});
    this.#listener = undefined;
  }
}
