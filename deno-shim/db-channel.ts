// A function's ctx.db calls on a channel of their own, straight to its site's database process
// (control-plane/site-databases/deno/channel.ts) instead of through the host. On the first call the
// shim asks the host for the channel: the host links this worker's one permitted path for it to the
// process and gives a token, which the shim presents first. Calls then go and come back in order.
// The host gives none when the database is elsewhere or not in its normal state, and closes it when it
// needs the database to itself: the calls then come through the host as before. The process checks a
// call's arguments with the host's own code (control-plane/site-databases/function-calls.ts) and
// answers a call that fails them with the host's error, so the shim sends them as the function gave
// them, in the JSON the host would have read.
import {
  type CtxResult,
  DB_CHANNEL_METHOD,
  FrameReader,
  HEADER_BYTES,
  type LogEntry,
  MAX_CTX_CALL_BYTES,
  decodeJson,
  encodeFrame,
  type FrameTypeValue,
} from '../runtime-host/protocol.ts';
import {
  type ChannelAnswer,
  ChannelFrame,
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

/** What one read of the channel takes at most. */
const READ_BYTES = 64 * 1024;
/** After the host gave no channel, calls go through it for this long before the shim asks again. */
const ASK_AGAIN_MS = 1000;

/** What became of a call sent on the channel. */
type Outcome = { kind: 'answer'; result: ChannelAnswer } | { kind: 'closed' } | { kind: 'lost' };

const encoder = new TextEncoder();

const frameBytes = (type: number): number =>
  type === ChannelFrame.Answer ? MAX_DB_FRAME_BYTES : type === ChannelFrame.Closed ? HEADER_BYTES : 0;

class Channel {
  readonly #conn: Deno.Conn;
  readonly token: string;
  readonly #waiting: Array<(outcome: Outcome) => void> = [];
  #queued: Uint8Array[] = [];
  /** Writes go one after another, so frames never interleave. */
  #writing: Promise<void> = Promise.resolve();
  #stream = 1;
  #ended: 'closed' | 'lost' | null = null;
  readonly ended: Promise<'closed' | 'lost'>;

  constructor(conn: Deno.Conn, token: string) {
    this.#conn = conn;
    this.token = token;
    this.#queue(encodeFrame(ChannelFrame.Hello as FrameTypeValue, 0, encoder.encode(token)));
    this.ended = this.#read();
  }

  call(payload: Uint8Array): Promise<Outcome> {
    if (this.#ended) return Promise.resolve({ kind: this.#ended });
    const outcome = new Promise<Outcome>((resolve) => this.#waiting.push(resolve));
    this.#queue(encodeFrame(ChannelFrame.Call as FrameTypeValue, this.#stream++, payload));
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
    const bytes = frames.length === 1 ? frames[0]! : concat(frames);
    this.#writing = this.#writing.then(async () => {
      try {
        for (let written = 0; written < bytes.length; ) written += await this.#conn.write(bytes.subarray(written));
      } catch {
        // The read side sees the channel end.
      }
    });
  }

  async #read(): Promise<'closed' | 'lost'> {
    const reader = new FrameReader(frameBytes);
    const buffer = new Uint8Array(READ_BYTES);
    let ended: 'closed' | 'lost' = 'lost';
    try {
      read: for (let read = await this.#conn.read(buffer); read !== null; read = await this.#conn.read(buffer)) {
        for (const frame of reader.push(buffer.slice(0, read))) {
          if (frame.type === ChannelFrame.Closed) {
            ended = 'closed';
            break read;
          }
          const resolve = this.#waiting.shift();
          if (!resolve) break read;
          resolve({ kind: 'answer', result: decodeJson<ChannelAnswer>(frame.payload) });
        }
      }
    } catch {
      // A broken frame or connection: the channel is lost.
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

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/**
 * Wraps the host's calls: ctx.db calls go on the channel at `path` when there is one, everything else
 * (and every db call the channel cannot take) to the host. `log` writes the site's log lines the host
 * would have written for a failed statement.
 */
export function throughDbChannel(
  path: string,
  callHost: CallHost,
  requestId: () => string | null,
  log: (entry: LogEntry) => void,
): CallHost {
  /** The channel, or the asking for it under way; null: none, ask on the next call. */
  let channel: Promise<Channel | null> | null = null;
  let refusedAt = Number.NEGATIVE_INFINITY;

  async function open(): Promise<Channel | null> {
    const granted = await callHost(DB_CHANNEL_METHOD, ['open']);
    const token = granted.ok ? (granted.value as { token?: unknown } | null)?.token : undefined;
    if (typeof token !== 'string') return null;
    const opened = new Channel(await Deno.connect({ transport: 'unix', path }), token);
    const asked = channel;
    // Once it ends, the next call asks for another.
    void opened.ended.then(() => {
      if (channel === asked) channel = null;
    });
    return opened;
  }

  function channelNow(): Promise<Channel | null> | null {
    if (channel) return channel;
    if (performance.now() - refusedAt < ASK_AGAIN_MS) return null;
    channel = open().catch(() => null);
    void channel.then((opened) => {
      if (opened) return;
      refusedAt = performance.now();
      channel = null;
    });
    return channel;
  }

  /** Why the channel broke off, as the host tells it: the error each call it did not answer gets. */
  const lost = new WeakMap<Channel, Promise<CtxResult>>();
  const lostResult = (broken: Channel): Promise<CtxResult> => {
    let result = lost.get(broken);
    if (!result) {
      result = callHost(DB_CHANNEL_METHOD, ['lost', broken.token, requestId()]);
      lost.set(broken, result);
    }
    return result;
  };

  function answer(method: DbMethod, result: ChannelAnswer): CtxResult | null {
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
    const opened = await channelNow();
    if (!opened) return callHost(method, args);
    const outcome = await opened.call(payload);
    if (outcome.kind === 'closed') return callHost(method, args);
    if (outcome.kind === 'lost') return lostResult(opened);
    return answer(method, outcome.result) ?? callHost(method, args);
  };
}
