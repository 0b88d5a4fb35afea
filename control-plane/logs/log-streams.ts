// The live log streams open on this server: each waits until lines of its site may have been stored,
// which the change feed says once per stored batch per site (from any node), or until its slow poll is
// due in case a notification was lost. An account holds a bounded number of streams at a time, and a
// server that shuts down ends them all at once. A key revoked or sessions ended (the change feed's
// `credentials`) make every stream check its credential again at once.
import type { Change, ChangeFeed, ChangeListener } from '../db/changes.ts';
import type { CloseStack } from '../close-stack.ts';
import type { Logger } from '../log.ts';
import type { FunctionLogBuffer } from './function-log-buffer.ts';
import { BerthError } from '../errors.ts';

declare module '../deps.ts' {
  interface Deps {
    /** The live log streams open on this server, woken by the change feed when lines are stored. */
    logStreams: LogStreams;
  }
}

/** Streams one account may hold open on one server. */
export const STREAMS_PER_ACCOUNT = 8;

/** One open stream: waits for its site's lines until it ends. */
export class LogStream {
  readonly siteId: string;
  readonly #release: (stream: LogStream) => void;
  #pending = false;
  #recheck = false;
  #ended = false;
  #wake: () => void = () => {};

  constructor(siteId: string, release: (stream: LogStream) => void) {
    this.siteId = siteId;
    this.#release = release;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Lines may have been stored: the next wait returns at once. */
  notify(): void {
    this.#pending = true;
    this.#wake();
  }

  /** A credential was revoked somewhere: this stream checks its own before it sends more. */
  recheck(): void {
    this.#recheck = true;
    this.notify();
  }

  /** Whether a check of the credential was asked for since the last call. */
  takeRecheck(): boolean {
    const asked = this.#recheck;
    this.#recheck = false;
    return asked;
  }

  /** Resolves when lines may have been stored, the stream ended, or after `ms`. */
  wait(ms: number): Promise<void> {
    if (this.#pending || this.#ended) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = () => {};
        this.#pending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  /** The client went or the server is closing; frees the account's place. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#release(this);
    this.#wake();
  }
}

export class LogStreams implements ChangeListener {
  readonly #perAccount: number;
  readonly #bySite = new Map<string, Set<LogStream>>();
  readonly #countByAccount = new Map<string, number>();
  #closed = false;

  constructor(perAccount = STREAMS_PER_ACCOUNT) {
    this.#perAccount = perAccount;
  }

  /** A new stream of the site's lines for the account, or `too_many_attempts` when it holds its share. */
  open(accountId: string, siteId: string): LogStream {
    const count = this.#countByAccount.get(accountId) ?? 0;
    if (count >= this.#perAccount)
      throw new BerthError(
        'too_many_attempts',
        `this account has ${this.#perAccount} log streams open on this server; close one and try again`,
        { limit: this.#perAccount },
      );
    this.#countByAccount.set(accountId, count + 1);
    const stream = new LogStream(siteId, (ended) => {
      const left = (this.#countByAccount.get(accountId) ?? 1) - 1;
      if (left > 0) this.#countByAccount.set(accountId, left);
      else this.#countByAccount.delete(accountId);
      const streams = this.#bySite.get(ended.siteId);
      streams?.delete(ended);
      if (streams?.size === 0) this.#bySite.delete(ended.siteId);
    });
    const streams = this.#bySite.get(siteId) ?? new Set();
    streams.add(stream);
    this.#bySite.set(siteId, streams);
    // A server that is closing ends the stream at once: its client reconnects to another.
    if (this.#closed) stream.end();
    return stream;
  }

  change(change: Change): void {
    if (change.kind === 'credentials')
      for (const streams of this.#bySite.values()) for (const stream of streams) stream.recheck();
    if (change.kind !== 'logs') return;
    for (const stream of this.#bySite.get(change.siteId) ?? []) stream.notify();
  }

  /** Notifications may have been missed (a revocation among them): every stream checks and looks now. */
  resync(): void {
    for (const streams of this.#bySite.values()) for (const stream of streams) stream.recheck();
  }

  /** Ends every stream and opens no more: the server is closing. */
  close(): void {
    this.#closed = true;
    for (const streams of [...this.#bySite.values()]) for (const stream of [...streams]) stream.end();
  }
}

/**
 * The streams of a start, following the change feed; each batch of function logs this node stores is
 * announced on it, one change per site, to every node's streams. The last batches of a closing server
 * are found by the other nodes' slow poll, the feed being closed by then.
 */
export function openLogStreams(
  parts: { functionLogs: FunctionLogBuffer; changes: ChangeFeed; log: Logger },
  stack: CloseStack,
): LogStreams {
  const { functionLogs, changes, log } = parts;
  const streams = new LogStreams();
  changes.subscribe(streams);
  functionLogs.onStored((siteIds) => {
    for (const siteId of siteIds)
      changes
        .publish({ kind: 'logs', siteId })
        .catch((err) => log.warn({ err }, 'could not announce stored log lines'));
  });
  stack.defer('the live log streams', () => {
    functionLogs.onStored(() => {});
    streams.close();
  });
  return streams;
}
