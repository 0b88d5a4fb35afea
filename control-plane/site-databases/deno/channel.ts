// The workers' channels into a site database process (see ../protocol.ts, ChannelFrame): a function's
// ctx.db calls come here straight from its worker instead of through Berth. The host lets each channel
// in with a token of its own (`grant`), given to that one worker; the process listens at the one path
// Deno lets it use, to which the host links the path of each worker of the site (and no other).
// Whatever a channel sends, its calls run as the function's (`function` access) after the same checks
// the host makes (../function-calls.ts), failing them as the host does; a frame that is malformed, too
// large or not a ctx.db call closes it.
// What the channels did goes back to the host (ChannelStats) for its counts, metrics and replication.
import { setImmediate } from 'node:timers';
import {
  type Frame,
  FrameReader,
  HEADER_BYTES,
  MAX_CTX_CALL_BYTES,
  decodeJson,
  encodeFrame,
} from '../../../runtime-host/protocol.ts';
import { type DbMethod, FunctionCallError, callStatements, checkStatement, isDbMethod } from '../function-calls.ts';
import { CHANNEL_TOKEN_CHARS, type ChannelCall, ChannelFrame, type ChannelStats, type Statement } from '../protocol.ts';

/** What a channel's call runs: the function's statements, answered as a DbResult's JSON. */
export type RunForFunction = (statements: Statement[]) => { answer: string; ok: boolean; wrote: boolean };

/** What one read of a channel takes at most. */
const READ_BYTES = 64 * 1024;
/** How long a channel's calls may hold the process before others, the host first, get a turn. */
const TURN_MS = 10;
/** Connections that have not said Hello yet, at most; more are closed at once. */
const MAX_UNGREETED = 16;
/** How long a closing channel's last answers may take to leave before it is closed regardless. */
const CLOSE_GRACE_MS = 5000;

const frameBytes = (type: number): number =>
  type === ChannelFrame.Hello
    ? HEADER_BYTES + CHANNEL_TOKEN_CHARS
    : type === ChannelFrame.Call
      ? HEADER_BYTES + MAX_CTX_CALL_BYTES
      : 0;

interface Connection {
  conn: Deno.UnixConn;
  open: boolean;
  /** Answers written in order: each waits for the one before. */
  writing: Promise<unknown>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class Channels {
  readonly #path: string;
  readonly #run: RunForFunction;
  #listener: Deno.Listener | null = null;
  readonly #tokens = new Set<string>();
  readonly #connections = new Set<Connection>();
  #ungreeted = 0;
  #stats: ChannelStats = { calls: {}, statements: [], firstWriteAt: null };
  #dirty = false;

  constructor(path: string, run: RunForFunction) {
    this.#path = path;
    this.#run = run;
  }

  /** Lets in one channel that presents `token`, once. */
  grant(token: string): void {
    if (typeof token !== 'string' || token.length !== CHANNEL_TOKEN_CHARS) throw new Error('not a channel token');
    if (!this.#listener) {
      // A process of the site before this one may have left its socket.
      try {
        Deno.removeSync(this.#path);
      } catch (err) {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
      }
      this.#listener = Deno.listen({ transport: 'unix', path: this.#path });
      void this.#accept(this.#listener);
    }
    this.#tokens.add(token);
  }

  /**
   * Closes every channel, saying Closed first, and forgets every token not yet used; no channel's call
   * runs from now on. Resolves once the channels are closed.
   */
  closeAll(): Promise<void> {
    this.#tokens.clear();
    return Promise.all([...this.#connections].map((connection) => this.#close(connection, true))).then(() => {});
  }

  /** Closes every channel and stops listening: the process is ending. */
  stop(): Promise<void> {
    this.#listener?.close();
    this.#listener = null;
    return this.closeAll();
  }

  /** What the channels did since the last time this was asked, or null when nothing. */
  takeStats(): ChannelStats | null {
    if (!this.#dirty) return null;
    const stats = this.#stats;
    this.#stats = { calls: {}, statements: [], firstWriteAt: null };
    this.#dirty = false;
    return stats;
  }

  async #accept(listener: Deno.Listener): Promise<void> {
    try {
      for await (const conn of listener) {
        if (this.#ungreeted >= MAX_UNGREETED) {
          conn.close();
          continue;
        }
        void this.#serve({ conn: conn as Deno.UnixConn, open: true, writing: Promise.resolve() });
      }
    } catch {
      // The listener was closed: the process is ending.
    }
  }

  async #serve(connection: Connection): Promise<void> {
    const reader = new FrameReader(frameBytes);
    const buffer = new Uint8Array(READ_BYTES);
    let greeted = false;
    this.#ungreeted++;
    this.#connections.add(connection);
    try {
      for (let read = await connection.conn.read(buffer); read !== null; read = await connection.conn.read(buffer)) {
        const frames = reader.push(buffer.slice(0, read));
        let answers: Uint8Array[] = [];
        let turn = performance.now();
        for (const frame of frames) {
          if (!connection.open) return;
          if (!greeted) {
            this.#hello(frame);
            greeted = true;
            this.#ungreeted--;
            continue;
          }
          // The host's ping, and other channels, get their turn after TURN_MS of this one's calls.
          if (performance.now() - turn > TURN_MS) {
            this.#write(connection, answers);
            answers = [];
            await new Promise((resolve) => setImmediate(resolve));
            if (!connection.open) return;
            turn = performance.now();
          }
          answers.push(this.#answer(frame));
        }
        this.#write(connection, answers);
      }
    } catch {
      // A frame that breaks the protocol closes the channel; the worker learns nothing more.
    } finally {
      if (!greeted) this.#ungreeted--;
      void this.#close(connection, false);
    }
  }

  #hello(frame: Frame): void {
    if (frame.type !== ChannelFrame.Hello) throw new Error('a channel begins with Hello');
    const token = decoder.decode(frame.payload);
    if (!this.#tokens.delete(token)) throw new Error('not a token this process was given');
  }

  /** Answers of one read leave in one write, in order after those before. */
  #write(connection: Connection, answers: Uint8Array[]): void {
    if (answers.length === 0) return;
    const bytes = answers.length === 1 ? answers[0]! : concat(answers);
    connection.writing = connection.writing.then(() => writeAll(connection.conn, bytes));
  }

  /**
   * Runs one call. A call whose arguments or statements fail the host's checks is answered with the
   * host's error for them (ChannelAnswer's `code`); one that is not a ctx.db call at all closes the channel.
   */
  #answer(frame: Frame): Uint8Array {
    if (frame.type !== ChannelFrame.Call) throw new Error('a channel carries calls only');
    const receivedAt = Date.now();
    const { method, args } = decodeJson<ChannelCall>(frame.payload) ?? {};
    if (!isDbMethod(method) || !Array.isArray(args)) throw new Error('not a ctx.db call');
    this.#called(method);
    let statements: Statement[];
    try {
      statements = callStatements(method, args);
      statements.forEach(checkStatement);
    } catch (err) {
      if (!(err instanceof FunctionCallError)) throw err;
      return encodeFrame(
        ChannelFrame.Answer,
        frame.stream,
        encoder.encode(JSON.stringify({ ok: false, error: { code: err.code, message: err.message } })),
      );
    }
    const started = performance.now();
    const { answer, ok, wrote } = this.#run(statements);
    this.#ran(ok, (performance.now() - started) / 1000, wrote ? receivedAt : null);
    return encodeFrame(ChannelFrame.Answer, frame.stream, encoder.encode(answer));
  }

  /** Counted as the host counts a ctx call: before its arguments are checked. */
  #called(method: DbMethod): void {
    this.#stats.calls[method] = (this.#stats.calls[method] ?? 0) + 1;
    this.#dirty = true;
  }

  #ran(ok: boolean, seconds: number, wroteAt: number | null): void {
    this.#stats.statements.push([ok, seconds]);
    if (wroteAt !== null && this.#stats.firstWriteAt === null) this.#stats.firstWriteAt = wroteAt;
  }

  /** `announce`: the host closes it, and the worker is told its unanswered calls were not run. */
  #close(connection: Connection, announce: boolean): Promise<void> {
    if (!connection.open) return Promise.resolve();
    connection.open = false;
    this.#connections.delete(connection);
    const { conn } = connection;
    const closed = connection.writing.then(() =>
      announce ? writeAll(conn, encodeFrame(ChannelFrame.Closed, 0)) : undefined,
    );
    const force = setTimeout(() => conn.close(), CLOSE_GRACE_MS);
    return closed
      .catch(() => {})
      .finally(() => {
        clearTimeout(force);
        try {
          conn.close();
        } catch {
          // Closed already.
        }
      });
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let written = 0; written < bytes.length; ) written += await conn.write(bytes.subarray(written));
}
