// The wire protocol between the runtime host (Node) and the shim inside each Deno worker, defined
// once for both sides. Dependency-free and web-standard only, because Deno imports it too.
//
// A frame is: u32 length of what follows | u8 type | u32 stream id | payload.
// The stream id ties frames to one request (host-assigned) or one ctx call (shim-assigned).

export const FrameType = {
  /** shim → host, once connected: the worker is ready for requests. Payload: JSON ReadyInfo. */
  Ready: 1,
  /** host → shim: a whole request. Payload: u32 head length | JSON RequestHead | body bytes. */
  Request: 2,
  /** shim → host: status and headers. Payload: JSON ResponseHead. */
  ResponseHead: 3,
  /** shim → host: a piece of the response body. Payload: bytes. */
  ResponseChunk: 4,
  /** shim → host: the response body is complete. */
  ResponseEnd: 5,
  /** shim → host: the handler threw or returned something other than a Response. Payload: JSON HandlerFailure. */
  ResponseError: 6,
  /** shim → host: a ctx call. Payload: JSON CtxCall. */
  CtxCall: 7,
  /** host → shim: a ctx call's outcome. Payload: JSON CtxResult. */
  CtxResult: 8,
  /** shim → host: console output. Payload: JSON LogEntry. */
  Log: 9,
  /** host → shim: the client went away; abort the request's signal. */
  Cancel: 10,
  /** host → spare shim, once: the function it will serve for its whole life. Payload: u32 head length | JSON LoadHead | source bytes. */
  Load: 11,
  /** spare shim → host, once connected: booted and waiting for its function (a Load). No payload. */
  Standby: 12,
} as const;

export type FrameTypeValue = (typeof FrameType)[keyof typeof FrameType];

/** Where a worker's fetches go (runtime-host/egress-proxy.ts), and its grant there. */
export interface EgressRoute {
  url: string;
  token: string;
}

/** What the shim needs before the function runs (in the entry program, see function-files.ts); never shown to the function. */
export interface ChannelParams {
  socketPath: string;
  siteId: string;
  egress: EgressRoute;
  kind: 'api' | 'cron';
  /** The function module's file URL, and its path in the site, which stack traces show instead. */
  functionUrl: string;
  sourcePath: string;
}

/** What a spare is told with its function's source (see Load); never shown to the function. */
export interface LoadHead {
  siteId: string;
  egress: EgressRoute;
  kind: 'api' | 'cron';
  /** The function's path in its site, which stack traces show instead of the module's URL. */
  sourcePath: string;
  /** The module's language: a v0 source is TypeScript, a built module JavaScript (nothing to strip). */
  language: 'ts' | 'js';
}

export interface ReadyInfo {
  handler: 'default' | 'handler';
}

export interface RequestHead {
  method: string;
  url: string;
  headers: Array<[string, string]>;
  /** Berth's request id, attached to the function's log lines. */
  requestId: string;
}

export interface ResponseHead {
  status: number;
  headers: Array<[string, string]>;
}

export interface HandlerFailure {
  message: string;
  /** Set when the error carried a stable code (e.g. from a ctx call) worth passing on. */
  code?: string;
  status?: number;
}

export interface CtxCall {
  requestId: string | null;
  /** "namespace.method", e.g. "data.readJson". */
  method: string;
  args: unknown[];
}

export type CtxResult =
  | { ok: true; value: unknown }
  | { ok: false; error: { code: string; message: string; status?: number } };

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface LogEntry {
  requestId: string | null;
  level: LogLevel;
  message: string;
}

/** ctx error codes the host sends back to functions. */
export const CtxErrorCode = {
  UnknownMethod: 'CTX_UNKNOWN_METHOD',
  InvalidArgument: 'CTX_INVALID_ARGUMENT',
  Failed: 'CTX_FAILED',
} as const;

export const HEADER_BYTES = 9;
/** The default cap of a whole frame, header included. */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;
/** Response bodies travel in chunks of at most this many bytes. */
export const CHUNK_BYTES = 256 * 1024;
/** Console lines (and raw output lines) are cut at this many characters. */
export const MAX_LOG_CHARS = 16 * 1024;
/** A ctx call's JSON: room for a 10 MiB file written by ctx.data.writeText, with escapes. */
export const MAX_CTX_CALL_BYTES = 16 * 1024 * 1024;

/**
 * The shim's own ctx call about its line to the site's database (deno-shim/db-line.ts), not a
 * method of the contract: args ['open', token] asks the host to have the database's process connect
 * to the worker's socket with `token` (answered true once it has, false when it will not);
 * ['lost', token, requestId] asks why one broke off (answered with the error its calls get).
 */
export const DB_LINE_METHOD = '$db.line';

/**
 * The one more path a worker uses: where it listens for its line to its site's database, from before
 * its function runs.
 */
export const dbLinePath = (socketPath: string): string => `${socketPath}.db`;

/** `parts` in order as one buffer (the part itself when there is one): frames of one turn leave in one write. */
export function joinBytes(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** `bytes` written whole to a connection whose writes may take part of a buffer (Deno's `Conn.write`). */
export async function writeAll(conn: { write(bytes: Uint8Array): Promise<number> }, bytes: Uint8Array): Promise<void> {
  for (let written = 0; written < bytes.length; ) written += await conn.write(bytes.subarray(written));
}

/** `bytes` written whole to a synchronous sink that may take part of a buffer (Deno's `stdout.writeSync`). */
export function writeAllSync(sink: { writeSync(bytes: Uint8Array): number }, bytes: Uint8Array): void {
  for (let written = 0; written < bytes.length; ) written += sink.writeSync(bytes.subarray(written));
}

/** A request's head (URL and headers) as JSON; the body limit comes on top. */
export const MAX_REQUEST_HEAD_BYTES = 1024 * 1024;

/**
 * The largest payload the shim may send in each frame type; the host stops a worker that declares
 * more, before reading the bytes. -1: the shim never sends that type.
 */
export function shimPayloadBytes(type: number): number {
  switch (type) {
    case FrameType.Ready:
      return 256;
    case FrameType.ResponseHead:
      return 256 * 1024;
    case FrameType.ResponseChunk:
      return CHUNK_BYTES;
    case FrameType.ResponseEnd:
      return 0;
    case FrameType.ResponseError:
    case FrameType.Log:
      return 128 * 1024;
    case FrameType.CtxCall:
      return MAX_CTX_CALL_BYTES;
    case FrameType.Standby:
      return 0;
    default:
      return -1;
  }
}

/** The whole-frame cap the host reads the shim's frames with. */
export const shimFrameBytes = (type: number): number => {
  const payload = shimPayloadBytes(type);
  return payload < 0 ? 0 : HEADER_BYTES + payload;
};

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeFrame(type: FrameTypeValue, stream: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const frame = new Uint8Array(HEADER_BYTES + payload.length);
  const view = new DataView(frame.buffer);
  view.setUint32(0, 5 + payload.length);
  view.setUint8(4, type);
  view.setUint32(5, stream);
  frame.set(payload, HEADER_BYTES);
  return frame;
}

export const encodeJson = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));
export const decodeJson = <T>(bytes: Uint8Array): T => JSON.parse(decoder.decode(bytes)) as T;

/** A Request or Load frame's payload: the head's length, the head as JSON, then the body's bytes. */
function encodeHeadAndBody(head: unknown, body: Uint8Array): Uint8Array {
  const headBytes = encodeJson(head);
  const payload = new Uint8Array(4 + headBytes.length + body.length);
  new DataView(payload.buffer).setUint32(0, headBytes.length);
  payload.set(headBytes, 4);
  payload.set(body, 4 + headBytes.length);
  return payload;
}

function decodeHeadAndBody<T>(payload: Uint8Array): { head: T; body: Uint8Array } {
  const headLength = new DataView(payload.buffer, payload.byteOffset, payload.byteLength).getUint32(0);
  return {
    head: decodeJson<T>(payload.subarray(4, 4 + headLength)),
    body: payload.subarray(4 + headLength),
  };
}

export const encodeRequest = (head: RequestHead, body: Uint8Array): Uint8Array => encodeHeadAndBody(head, body);
export const decodeRequest = (payload: Uint8Array): { head: RequestHead; body: Uint8Array } =>
  decodeHeadAndBody<RequestHead>(payload);
export const encodeLoad = (head: LoadHead, source: Uint8Array): Uint8Array => encodeHeadAndBody(head, source);
export const decodeLoad = (payload: Uint8Array): { head: LoadHead; body: Uint8Array } =>
  decodeHeadAndBody<LoadHead>(payload);

/**
 * Rewrites host locations in a stack trace or message, as file URLs or paths, so a function never
 * learns where it runs: its own module becomes its path in the site, Berth's files (`berthUrl`, the
 * install's root) `berth:<file>`.
 */
export function pathRedactor(functionUrl: string, sourcePath: string, berthUrl: string): (text: string) => string {
  const rewrites: Array<[string, string]> = [];
  for (const [url, shown] of [
    [functionUrl, sourcePath],
    [berthUrl, 'berth:'],
  ] as const) {
    rewrites.push([url, shown], [decodeURIComponent(new URL(url).pathname), shown]);
  }
  return (text) => rewrites.reduce((out, [from, to]) => out.replaceAll(from, to), text);
}

export interface Frame {
  type: number;
  stream: number;
  payload: Uint8Array;
}

const SMALL_CHUNK_BYTES = 4 * 1024;
const BLOCK_BYTES = 64 * 1024;

/** A byte stream that is not a valid sequence of frames. */
export class FrameError extends Error {}

/**
 * Splits a byte stream into frames; feed it chunks as they arrive. Chunks are kept as they are and
 * copied once, when a whole frame is in, so a large frame arriving in small pieces costs linear time.
 * `maxFrameBytes(type)` caps a whole frame (header included) of each type; a frame over it is refused
 * as soon as its header arrives.
 */
export class FrameReader {
  readonly #maxFrameBytes: (type: number) => number;
  readonly #chunks: Uint8Array[] = [];
  /** Bytes of the first chunk already consumed. */
  #offset = 0;
  /** Bytes buffered and not yet consumed. */
  #length = 0;

  /** Where small chunks are gathered, so a stream of tiny reads does not cost an object per read. */
  #block: Uint8Array | null = null;
  #blockUsed = 0;

  constructor(maxFrameBytes: (type: number) => number = () => MAX_FRAME_BYTES) {
    this.#maxFrameBytes = maxFrameBytes;
  }

  /** Bytes held: never more than the frame in progress declares, which its type's cap bounds. */
  get buffered(): number {
    return this.#length;
  }

  push(chunk: Uint8Array): Frame[] {
    this.#append(chunk);
    const frames: Frame[] = [];
    while (this.#length >= HEADER_BYTES) {
      const header = this.#peek(HEADER_BYTES);
      const view = new DataView(header.buffer, header.byteOffset, HEADER_BYTES);
      const size = 4 + view.getUint32(0);
      const type = view.getUint8(4);
      if (size < HEADER_BYTES) throw new FrameError(`invalid frame length ${size - 4}`);
      const max = this.#maxFrameBytes(type);
      if (max < HEADER_BYTES) throw new FrameError(`frames of type ${type} are not accepted`);
      if (size > max)
        throw new FrameError(`a frame of type ${type} declares ${size} bytes, more than its limit of ${max}`);
      if (this.#length < size) break;
      const stream = view.getUint32(5);
      frames.push({ type, stream, payload: this.#take(size).subarray(HEADER_BYTES) });
    }
    return frames;
  }

  #append(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#length += chunk.length;
    // Nothing held and a whole header in: the chunk is kept as it is. Most chunks hold whole frames (a
    // response, a ctx call), taken from it without a copy; small pieces of a larger frame that follow
    // are gathered, and the next header is read from this chunk without a copy.
    if (chunk.length >= SMALL_CHUNK_BYTES || (this.#chunks.length === 0 && chunk.length >= HEADER_BYTES)) {
      this.#chunks.push(chunk);
      this.#block = null;
      return;
    }
    const block = this.#block;
    const last = this.#chunks.at(-1);
    if (
      block &&
      last &&
      last.buffer === block.buffer &&
      last.byteOffset + last.length === block.byteOffset + this.#blockUsed &&
      block.length - this.#blockUsed >= chunk.length
    ) {
      block.set(chunk, this.#blockUsed);
      this.#blockUsed += chunk.length;
      this.#chunks[this.#chunks.length - 1] = block.subarray(last.byteOffset - block.byteOffset, this.#blockUsed);
      return;
    }
    this.#block = new Uint8Array(BLOCK_BYTES);
    this.#block.set(chunk);
    this.#blockUsed = chunk.length;
    this.#chunks.push(this.#block.subarray(0, chunk.length));
  }

  /** The next `n` buffered bytes, without consuming them (n <= #length). */
  #peek(n: number): Uint8Array {
    const first = this.#chunks[0]!;
    if (first.length - this.#offset >= n) return first.subarray(this.#offset, this.#offset + n);
    const out = new Uint8Array(n);
    let filled = 0;
    for (let i = 0, offset = this.#offset; filled < n; i++, offset = 0) {
      const part = this.#chunks[i]!.subarray(offset, offset + n - filled);
      out.set(part, filled);
      filled += part.length;
    }
    return out;
  }

  /** Consumes the next `n` buffered bytes (n <= #length), copying only when they span chunks. */
  #take(n: number): Uint8Array {
    this.#length -= n;
    const first = this.#chunks[0]!;
    if (first.length - this.#offset >= n) {
      const out = first.subarray(this.#offset, this.#offset + n);
      this.#advance(n);
      return out;
    }
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.#chunks[0]!;
      const part = chunk.subarray(this.#offset, this.#offset + n - filled);
      out.set(part, filled);
      filled += part.length;
      this.#advance(part.length);
    }
    return out;
  }

  #advance(n: number): void {
    this.#offset += n;
    if (this.#offset === this.#chunks[0]!.length) {
      this.#chunks.shift();
      this.#offset = 0;
    }
  }
}
