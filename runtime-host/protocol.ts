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
} as const;

export type FrameTypeValue = (typeof FrameType)[keyof typeof FrameType];

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

export type CtxResult = { ok: true; value: unknown } | { ok: false; error: { code: string; message: string; status?: number } };

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
/** Frames larger than this are a protocol violation; bodies are split into smaller chunks. */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

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

/** A Request frame's payload: the head's length, the head as JSON, then the body. */
export function encodeRequest(head: RequestHead, body: Uint8Array): Uint8Array {
  const headBytes = encodeJson(head);
  const payload = new Uint8Array(4 + headBytes.length + body.length);
  new DataView(payload.buffer).setUint32(0, headBytes.length);
  payload.set(headBytes, 4);
  payload.set(body, 4 + headBytes.length);
  return payload;
}

export function decodeRequest(payload: Uint8Array): { head: RequestHead; body: Uint8Array } {
  const headLength = new DataView(payload.buffer, payload.byteOffset, payload.byteLength).getUint32(0);
  return {
    head: decodeJson<RequestHead>(payload.subarray(4, 4 + headLength)),
    body: payload.subarray(4 + headLength),
  };
}

export interface Frame {
  type: number;
  stream: number;
  payload: Uint8Array;
}

/** Splits a byte stream into frames; feed it chunks as they arrive. */
export class FrameReader {
  #buffer: Uint8Array = new Uint8Array(0);

  push(chunk: Uint8Array): Frame[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : concat(this.#buffer, chunk);
    const frames: Frame[] = [];
    while (this.#buffer.length >= 4) {
      const view = new DataView(this.#buffer.buffer, this.#buffer.byteOffset, this.#buffer.byteLength);
      const length = view.getUint32(0);
      if (length < 5 || length > MAX_FRAME_BYTES) throw new Error(`invalid frame length ${length}`);
      if (this.#buffer.length < 4 + length) break;
      frames.push({
        type: view.getUint8(4),
        stream: view.getUint32(5),
        payload: this.#buffer.subarray(HEADER_BYTES, 4 + length),
      });
      this.#buffer = this.#buffer.subarray(4 + length);
    }
    return frames;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
