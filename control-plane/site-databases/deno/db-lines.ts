// The workers' lines into a site database process (see ../protocol.ts, LineFrame): a function's
// ctx.db calls come here straight from its worker instead of through Berth. Each worker listens on a
// path of its own, which it cannot touch itself once listening; when it asks for a line, the host
// links the one path Deno lets this process use to that worker's socket and tells the process to
// connect there (`connect`), presenting the token the worker gave, so a worker's line comes only from
// its own site's database, at the host's word.
// Whatever a line sends, its calls run as the function's (`function` access) after the same checks
// the host makes (../function-calls.ts), failing them as the host does; a frame that is malformed, too
// large or not a ctx.db call closes it.
// What the lines did goes back to the host (LineStats) for its counts, metrics and replication.
import { setImmediate } from 'node:timers';
import {
  type Frame,
  FrameReader,
  HEADER_BYTES,
  MAX_CTX_CALL_BYTES,
  decodeJson,
  encodeFrame,
  joinBytes,
  writeAll,
} from '../../../runtime-host/protocol.ts';
import { type DbMethod, FunctionCallError, callStatements, checkStatement, isDbMethod } from '../function-calls.ts';
import { LINE_TOKEN_CHARS, type LineCall, LineFrame, type LineStats, type Statement } from '../protocol.ts';

/** What a line's call runs: the function's statements, answered as a DbResult's JSON. */
export type RunForFunction = (statements: Statement[]) => { answer: string; ok: boolean; wrote: boolean };

/** What one read of a line takes at most. */
const READ_BYTES = 64 * 1024;
/** How long a line's calls may hold the process before others, the host first, get a turn. */
const TURN_MS = 10;
/** How long a closing line's last answers may take to leave before it is closed regardless. */
const CLOSE_GRACE_MS = 5000;
/**
 * Answers a line may have waiting to leave before the process reads no more of its calls: a worker
 * that reads none of its answers holds up its own line, not the process's memory.
 */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;

/** A worker sends calls only. */
const frameBytes = (type: number): number => (type === LineFrame.Call ? HEADER_BYTES + MAX_CTX_CALL_BYTES : 0);
const TOKEN = new RegExp(`^[0-9a-f]{${LINE_TOKEN_CHARS}}$`);

interface Connection {
  conn: Deno.Conn;
  open: boolean;
  /** Answers written in order: each waits for the one before. */
  writing: Promise<unknown>;
  /** Bytes of answers not yet written. */
  unsent: number;
}

const encoder = new TextEncoder();

export class DbLines {
  readonly #path: string;
  readonly #run: RunForFunction;
  readonly #connections = new Set<Connection>();
  #stats: LineStats = { calls: {}, statements: [], firstWriteAt: null };
  #dirty = false;

  constructor(path: string, run: RunForFunction) {
    this.#path = path;
    this.#run = run;
  }

  /**
   * Connects to the worker the host has linked this process's path to, and says Hello with `token`;
   * resolves once the line is open. The host links the path for one connect at a time.
   */
  async connect(token: string): Promise<void> {
    if (typeof token !== 'string' || !TOKEN.test(token)) throw new Error('not a line token');
    const conn = await Deno.connect({ transport: 'unix', path: this.#path });
    await writeAll(conn, encodeFrame(LineFrame.Hello, 0, encoder.encode(token)));
    void this.#serve({ conn, open: true, writing: Promise.resolve(), unsent: 0 });
  }

  /** Closes every line, saying Closed first; no line's call runs from now on. Resolves once they are closed. */
  closeAll(): Promise<void> {
    return Promise.all([...this.#connections].map((connection) => this.#close(connection, true))).then(() => {});
  }

  /** What the lines did since the last time this was asked, or null when nothing. */
  takeStats(): LineStats | null {
    if (!this.#dirty) return null;
    const stats = this.#stats;
    this.#stats = { calls: {}, statements: [], firstWriteAt: null };
    this.#dirty = false;
    return stats;
  }

  async #serve(connection: Connection): Promise<void> {
    const reader = new FrameReader(frameBytes);
    const buffer = new Uint8Array(READ_BYTES);
    this.#connections.add(connection);
    try {
      for (let read = await connection.conn.read(buffer); read !== null; read = await connection.conn.read(buffer)) {
        const frames = reader.push(buffer.slice(0, read));
        let answers: Uint8Array[] = [];
        let turn = performance.now();
        let answered = 0;
        for (const frame of frames) {
          if (!connection.open) return;
          // The host's ping, and other lines, get their turn after TURN_MS of this one's calls, and
          // answers the worker has not taken yet are waited for past MAX_UNSENT_BYTES.
          if (performance.now() - turn > TURN_MS || answered > MAX_UNSENT_BYTES) {
            this.#write(connection, answers);
            answers = [];
            answered = 0;
            await this.#turn(connection);
            if (!connection.open) return;
            turn = performance.now();
          }
          const answer = this.#answer(frame);
          answers.push(answer);
          answered += answer.length;
        }
        this.#write(connection, answers);
        if (connection.unsent > MAX_UNSENT_BYTES) await this.#turn(connection);
      }
    } catch {
      // A frame that breaks the protocol closes the line; the worker learns nothing more.
    } finally {
      void this.#close(connection, false);
    }
  }

  /** Gives others a turn, and waits for the worker to take its answers when too many are unsent. */
  async #turn(connection: Connection): Promise<void> {
    if (connection.unsent > MAX_UNSENT_BYTES) await connection.writing.catch(() => {});
    else await new Promise((resolve) => setImmediate(resolve));
  }

  /** Answers of one read leave in one write, in order after those before. */
  #write(connection: Connection, answers: Uint8Array[]): void {
    if (answers.length === 0) return;
    const bytes = joinBytes(answers);
    connection.unsent += bytes.length;
    connection.writing = connection.writing
      .then(() => writeAll(connection.conn, bytes))
      .finally(() => {
        connection.unsent -= bytes.length;
      });
  }

  /**
   * Runs one call. A call whose arguments or statements fail the host's checks is answered with the
   * host's error for them (LineAnswer's `code`); one that is not a ctx.db call at all closes the line.
   */
  #answer(frame: Frame): Uint8Array {
    if (frame.type !== LineFrame.Call) throw new Error('a line carries calls only');
    const receivedAt = Date.now();
    const { method, args } = decodeJson<LineCall>(frame.payload) ?? {};
    if (!isDbMethod(method) || !Array.isArray(args)) throw new Error('not a ctx.db call');
    this.#called(method);
    let statements: Statement[];
    try {
      statements = callStatements(method, args);
      statements.forEach(checkStatement);
    } catch (err) {
      if (!(err instanceof FunctionCallError)) throw err;
      return encodeFrame(
        LineFrame.Answer,
        frame.stream,
        encoder.encode(JSON.stringify({ ok: false, error: { code: err.code, message: err.message } })),
      );
    }
    const started = performance.now();
    const { answer, ok, wrote } = this.#run(statements);
    this.#ran(ok, (performance.now() - started) / 1000, wrote ? receivedAt : null);
    return encodeFrame(LineFrame.Answer, frame.stream, encoder.encode(answer));
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
      announce ? writeAll(conn, encodeFrame(LineFrame.Closed, 0)) : undefined,
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
