// A function's ctx.db calls on a line of their own, straight to its site's database process
// (control-plane/site-databases/deno/db-lines.ts) instead of through the host. The shim listens on the
// worker's one more path (listen(), before the function's module runs, after which nothing in the
// worker can touch that path again). On the first call it asks the host for the line with a token
// of its own; the host has the site's database process connect there and say Hello with that token,
// and only such a connection becomes the line. Calls then go and come back in order. The host
// opens none when the database is elsewhere or not in its normal state, and closes it when it needs
// the database to itself: the calls then come through the host as before. The process checks a call's
// arguments with the host's own code (control-plane/site-databases/function-calls.ts) and answers a
// call that fails them with the host's error, so the shim sends them as the function gave them, in the
// JSON the host would have read.
import {
  type CtxResult,
  DB_LINE_METHOD,
  FrameReader,
  HEADER_BYTES,
  type LogEntry,
  MAX_CTX_CALL_BYTES,
  decodeJson,
  encodeFrame,
  joinBytes,
  type FrameTypeValue,
  writeAll,
} from '../runtime-host/protocol.ts';
import {
  LINE_TOKEN_CHARS,
  type LineAnswer,
  LineFrame,
  MAX_DB_FRAME_BYTES,
  type StatementOutcome,
} from '../control-plane/site-databases/protocol.ts';
import {
  type DbMethod,
  callValue,
  functionFailure,
  functionOutcome,
  isDbMethod,
} from '../control-plane/site-databases/function-calls.ts';
import type { CallHost } from './context.ts';

/** What one read of the line takes at most. */
const READ_BYTES = 64 * 1024;
/** After the host gave no line, calls go through it for this long before the shim asks again. */
const ASK_AGAIN_MS = 1000;

/** What became of a call sent on the line. */
type Outcome = { kind: 'answer'; result: LineAnswer } | { kind: 'closed' } | { kind: 'lost' };

/** How long the process's connection may take to arrive once the host said it connected. */
const ARRIVAL_MS = 5000;

/**
 * Listens on `path` for the database process's connections, then gives up every permission on the
 * path: the function can neither connect there, listen there nor put anything else in its place.
 */
export function listen(path: string): Deno.Listener {
  const listener = Deno.listen({ transport: 'unix', path });
  Deno.permissions.revokeSync({ name: 'read', path });
  Deno.permissions.revokeSync({ name: 'write', path });
  Deno.permissions.revokeSync({ name: 'net', host: `unix:${path}` });
  return listener;
}

/**
 * The connections that arrive, each kept once its Hello names a token the shim is waiting for: the
 * others are closed. A connection that says nothing within ARRIVAL_MS is closed too.
 */
function arrivals(listener: Deno.Listener) {
  const waiting = new Map<string, (arrived: { conn: Deno.Conn; reader: FrameReader } | null) => void>();
  const greet = async (conn: Deno.Conn): Promise<void> => {
    let greeted = false;
    const reader = new FrameReader((type) =>
      !greeted && type === LineFrame.Hello ? HEADER_BYTES + LINE_TOKEN_CHARS : greeted ? frameBytes(type) : 0,
    );
    const buffer = new Uint8Array(256);
    const timer = setTimeout(() => conn.close(), ARRIVAL_MS);
    try {
      for (let read = await conn.read(buffer); read !== null; read = await conn.read(buffer)) {
        const [hello] = reader.push(buffer.slice(0, read));
        if (!hello) continue;
        const token = new TextDecoder().decode(hello.payload);
        const resolve = hello.type === LineFrame.Hello && waiting.get(token);
        if (!resolve) break;
        waiting.delete(token);
        greeted = true;
        clearTimeout(timer);
        resolve({ conn, reader });
        return;
      }
    } catch {
      // Closed below.
    }
    clearTimeout(timer);
    try {
      conn.close();
    } catch {
      // Closed already.
    }
  };
  void (async () => {
    try {
      for await (const conn of listener) void greet(conn);
    } catch {
      // The worker is ending.
    }
  })();
  return {
    /** The connection that will say Hello with `token`, or null once cancelled. */
    expect(token: string): { arrived: Promise<{ conn: Deno.Conn; reader: FrameReader } | null>; cancel(): void } {
      const arrived = new Promise<{ conn: Deno.Conn; reader: FrameReader } | null>((resolve) =>
        waiting.set(token, resolve),
      );
      return {
        arrived,
        cancel: () => {
          waiting.get(token)?.(null);
          waiting.delete(token);
        },
      };
    },
  };
}

const encoder = new TextEncoder();

const frameBytes = (type: number): number =>
  type === LineFrame.Answer ? MAX_DB_FRAME_BYTES : type === LineFrame.Closed ? HEADER_BYTES : 0;

class Line {
  readonly #conn: Deno.Conn;
  readonly token: string;
  readonly #waiting: Array<(outcome: Outcome) => void> = [];
  #queued: Uint8Array[] = [];
  /** Writes go one after another, so frames never interleave. */
  #writing: Promise<void> = Promise.resolve();
  #stream = 1;
  #ended: 'closed' | 'lost' | null = null;
  readonly ended: Promise<'closed' | 'lost'>;

  constructor(conn: Deno.Conn, reader: FrameReader, token: string) {
    this.#conn = conn;
    this.token = token;
    this.ended = this.#read(reader);
  }

  call(payload: Uint8Array): Promise<Outcome> {
    if (this.#ended) return Promise.resolve({ kind: this.#ended });
    const outcome = new Promise<Outcome>((resolve) => this.#waiting.push(resolve));
    this.#queue(encodeFrame(LineFrame.Call as FrameTypeValue, this.#stream++, payload));
    return outcome;
  }

  /** The frames of one turn leave in one write. */
  #queue(frame: Uint8Array): void {
    this.#queued.push(frame);
    if (this.#queued.length === 1) queueMicrotask(() => this.#flush());
  }

  #flush(): void {
    const frames = this.#queued;
    this.#queued = [];
    const bytes = joinBytes(frames);
    this.#writing = this.#writing.then(async () => {
      try {
        await writeAll(this.#conn, bytes);
      } catch {
        // The read side sees the line end.
      }
    });
  }

  async #read(reader: FrameReader): Promise<'closed' | 'lost'> {
    const buffer = new Uint8Array(READ_BYTES);
    let ended: 'closed' | 'lost' = 'lost';
    try {
      read: for (let read = await this.#conn.read(buffer); read !== null; read = await this.#conn.read(buffer)) {
        for (const frame of reader.push(buffer.slice(0, read))) {
          if (frame.type === LineFrame.Closed) {
            ended = 'closed';
            break read;
          }
          const resolve = this.#waiting.shift();
          if (!resolve) break read;
          resolve({ kind: 'answer', result: decodeJson<LineAnswer>(frame.payload) });
        }
      }
    } catch {
      // A broken frame or connection: the line is lost.
    }
    this.#ended = ended;
    try {
      this.#conn.close();
    } catch {
      // Closed already.
    }
    for (const resolve of this.#waiting.splice(0)) resolve({ kind: ended });
    return ended;
  }
}

/**
 * Wraps the host's calls: ctx.db calls go on the line at `path` when there is one, everything else
 * (and every db call the line cannot take) to the host. `log` writes the site's log lines the host
 * would have written for a failed statement.
 */
export function throughDbLine(
  listener: Deno.Listener,
  callHost: CallHost,
  requestId: () => string | null,
  log: (entry: LogEntry) => void,
): CallHost {
  /** The line, or the asking for it under way; null: none, ask on the next call. */
  let line: Promise<Line | null> | null = null;
  let refusedAt = Number.NEGATIVE_INFINITY;
  const connections = arrivals(listener);

  async function open(): Promise<Line | null> {
    const token = [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, '0')).join('');
    const expected = connections.expect(token);
    const opened = await callHost(DB_LINE_METHOD, ['open', token]);
    if (!opened.ok || opened.value !== true) {
      expected.cancel();
      return null;
    }
    const timer = setTimeout(expected.cancel, ARRIVAL_MS);
    const arrived = await expected.arrived;
    clearTimeout(timer);
    if (!arrived) return null;
    const connected = new Line(arrived.conn, arrived.reader, token);
    const asked = line;
    // Once it ends, the next call asks for another.
    void connected.ended.then(() => {
      if (line === asked) line = null;
    });
    return connected;
  }

  function lineNow(): Promise<Line | null> | null {
    if (line) return line;
    if (performance.now() - refusedAt < ASK_AGAIN_MS) return null;
    line = open().catch(() => null);
    void line.then((opened) => {
      if (opened) return;
      refusedAt = performance.now();
      line = null;
    });
    return line;
  }

  /** Why the line broke off, as the host tells it: the error each call it did not answer gets. */
  const lost = new WeakMap<Line, Promise<CtxResult>>();
  const lostResult = (broken: Line): Promise<CtxResult> => {
    let result = lost.get(broken);
    if (!result) {
      result = callHost(DB_LINE_METHOD, ['lost', broken.token, requestId()]);
      lost.set(broken, result);
    }
    return result;
  };

  function answer(method: DbMethod, result: LineAnswer): CtxResult | null {
    if (result.ok) {
      const value = result.value as StatementOutcome | StatementOutcome[];
      return { ok: true, value: callValue(method, (Array.isArray(value) ? value : [value]).map(functionOutcome)) };
    }
    const { error } = result;
    if ('code' in error) return { ok: false, error: { code: error.code, message: error.message } };
    // Writes paused: nothing changed; the host waits them out.
    if (error.reason === 'read_only') return null;
    const failure = functionFailure(error.reason, error.message);
    if (failure.diagnostic) log({ requestId: requestId(), level: 'error', message: `ctx.db: ${failure.diagnostic}` });
    return { ok: false, error: { code: failure.code, message: failure.message } };
  }

  return async (method, args) => {
    if (!isDbMethod(method)) return callHost(method, args);
    let payload: Uint8Array;
    try {
      payload = encoder.encode(JSON.stringify({ method, args }));
    } catch {
      // Not JSON: the host's call fails as it always has.
      return callHost(method, args);
    }
    // Near the cap of a call, the host says whether it is past it.
    if (payload.length > MAX_CTX_CALL_BYTES - 1024) return callHost(method, args);
    const opened = await lineNow();
    if (!opened) return callHost(method, args);
    const outcome = await opened.call(payload);
    if (outcome.kind === 'closed') return callHost(method, args);
    if (outcome.kind === 'lost') return lostResult(opened);
    return answer(method, outcome.result) ?? callHost(method, args);
  };
}
