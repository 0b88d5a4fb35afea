// The buffer behind function logs: lines are kept in memory and written in batches, so a chatty
// function costs one insert per batch, not per line; each site keeps its newest N lines.
import type { Db } from '../db/metadata.ts';
import type { Logger } from '../log.ts';
import { logJobFailure } from '../db/errors.ts';
import { lockTableForWriters } from '../db/locks.ts';
import type { LogEntry } from '../../runtime-host/protocol.ts';

declare module '../deps.ts' {
  interface Deps {
    functionLogs: FunctionLogBuffer;
  }
}

/** A stored log line, as the function_logs table has it. */
export interface LogRow {
  id: number;
  site_id: string;
  function_path: string | null;
  request_id: string | null;
  level: string;
  message: string;
  created_at: string;
}

const FLUSH_MS = 200;
const MAX_BUFFERED = 5000;

export interface LogStore {
  db: Db;
  log: Logger;
  /** Lines kept per site. */
  perSite: number;
}

/** Told once a batch is stored, with each site it held lines of (live log streams follow it). */
export type StoredListener = (siteIds: string[]) => void;

export class FunctionLogBuffer {
  readonly #store: LogStore;
  #rows: Array<Omit<LogRow, 'id'>> = [];
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  #stored: StoredListener = () => {};

  constructor(store: LogStore) {
    this.#store = store;
  }

  /** Who hears of stored batches: the change feed, which opens after the buffer. */
  onStored(listener: StoredListener): void {
    this.#stored = listener;
  }

  add(siteId: string, functionPath: string | null, entry: LogEntry): void {
    if (this.#rows.length >= MAX_BUFFERED) return;
    this.#rows.push({
      site_id: siteId,
      function_path: functionPath,
      request_id: entry.requestId,
      level: entry.level,
      message: entry.message,
      created_at: new Date().toISOString(),
    });
    this.#timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Writes what is buffered; resolves when it is stored. */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const rows = this.#rows;
    this.#rows = [];
    if (rows.length === 0) return this.#flushing;
    this.#flushing = this.#flushing.then(() => this.#write(rows));
    return this.#flushing;
  }

  async #write(rows: Array<Omit<LogRow, 'id'>>): Promise<void> {
    const { db, log, perSite } = this.#store;
    const siteIds = [...new Set(rows.map((r) => r.site_id))];
    try {
      await db.transaction(async (trx) => {
        // Ids in commit order across nodes, so a stream that has read up to an id has missed none below it.
        await lockTableForWriters(trx, 'function_logs');
        for (let i = 0; i < rows.length; i += 100) await trx('function_logs').insert(rows.slice(i, i + 100));
        for (const siteId of siteIds) {
          const oldest = await trx('function_logs')
            .where({ site_id: siteId })
            .orderBy('id', 'desc')
            .offset(perSite)
            .first('id');
          if (oldest) await trx('function_logs').where({ site_id: siteId }).andWhere('id', '<=', oldest.id).delete();
        }
      });
    } catch (err) {
      logJobFailure(log, err, 'could not store function logs');
      return;
    }
    this.#stored(siteIds);
  }
}
