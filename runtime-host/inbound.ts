// What the host accepts from a worker: every frame the shim sends is checked here before anything
// uses it, because the code inside the worker belongs to a tenant. Pure: the worker passes in what it
// knows of the channel and applies the outcome.
import {
  type CtxCall,
  type Frame,
  FrameType,
  type HandlerFailure,
  type LogEntry,
  type LogLevel,
  type ReadyInfo,
  type ResponseHead,
  shimFrameBytes,
} from './protocol.ts';

/** A frame the shim may not send; the worker that sent it is stopped. */
export class ProtocolViolation extends Error {}

/** What the worker knows of the channel when a frame arrives. */
export interface ChannelView {
  /** The Ready frame has arrived. */
  ready: boolean;
  /**
   * Set while the worker is a spare not given its function yet: 'announce' until its Standby frame
   * arrives, 'waiting' after it. A spare runs no tenant code, so it has nothing else to send.
   */
  spare?: 'announce' | 'waiting' | undefined;
  /** The highest ctx call id seen; call ids only grow. */
  lastCall: number;
  /** A request stream the host opened and that is not over: awaiting its head, or streaming its body. */
  response(stream: number): 'head' | 'body' | null;
}

export type Inbound =
  | { type: 'standby' }
  | { type: 'ready'; info: ReadyInfo }
  | { type: 'head'; stream: number; head: ResponseHead }
  | { type: 'chunk'; stream: number; bytes: Uint8Array }
  | { type: 'end'; stream: number }
  | { type: 'error'; stream: number; failure: HandlerFailure }
  | { type: 'ctx'; stream: number; call: CtxCall }
  | { type: 'log'; entry: LogEntry };

/** Caps of each frame type, for the host's FrameReader; unknown types are refused at the header. */
export const inboundFrameBytes = shimFrameBytes;

const MAX_ID_CHARS = 200;
const MAX_CODE_CHARS = 200;
const LEVELS: ReadonlySet<string> = new Set<LogLevel>(['debug', 'info', 'warn', 'error']);
/** Header names as the shim sends them (Deno lowercases them), and values Node will write. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const decoder = new TextDecoder('utf-8', { fatal: true });

const fail = (message: string): never => {
  throw new ProtocolViolation(message);
};

function json(frame: Frame, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(frame.payload));
  } catch {
    return fail(`${what} is not valid JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail(`${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

const isRequestId = (value: unknown): value is string | null =>
  value === null || (typeof value === 'string' && value.length <= MAX_ID_CHARS);

function readyInfo(frame: Frame): ReadyInfo {
  const { handler } = json(frame, 'Ready');
  if (handler !== 'default' && handler !== 'handler') fail('Ready names no handler');
  return { handler: handler as ReadyInfo['handler'] };
}

function responseHead(frame: Frame): ResponseHead {
  const { status, headers } = json(frame, 'ResponseHead');
  if (!Number.isInteger(status) || (status as number) < 200 || (status as number) > 599)
    fail('ResponseHead has an invalid status');
  if (!Array.isArray(headers)) return fail('ResponseHead headers are not a list');
  for (const pair of headers) {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string')
      fail('ResponseHead has a malformed header');
    if (!HEADER_NAME.test(pair[0]) || !HEADER_VALUE.test(pair[1]))
      fail('ResponseHead has an invalid header name or value');
  }
  return { status: status as number, headers: headers as Array<[string, string]> };
}

function handlerFailure(frame: Frame): HandlerFailure {
  const { message, code, status } = json(frame, 'ResponseError');
  if (typeof message !== 'string') fail('ResponseError has no message');
  const failure: HandlerFailure = { message: message as string };
  if (code !== undefined) {
    if (typeof code !== 'string' || code.length > MAX_CODE_CHARS) fail('ResponseError has an invalid code');
    failure.code = code as string;
  }
  if (status !== undefined) {
    if (!Number.isInteger(status)) fail('ResponseError has an invalid status');
    failure.status = status as number;
  }
  return failure;
}

function ctxCall(frame: Frame): CtxCall {
  const { requestId, method, args } = json(frame, 'CtxCall');
  if (!isRequestId(requestId)) fail('CtxCall has an invalid request id');
  if (typeof method !== 'string' || method.length > MAX_ID_CHARS) fail('CtxCall has an invalid method');
  if (!Array.isArray(args)) fail('CtxCall arguments are not a list');
  return { requestId: requestId as string | null, method: method as string, args: args as unknown[] };
}

function logEntry(frame: Frame): LogEntry {
  const { requestId, level, message } = json(frame, 'Log');
  if (!isRequestId(requestId)) fail('Log has an invalid request id');
  if (typeof level !== 'string' || !LEVELS.has(level)) fail('Log has an invalid level');
  if (typeof message !== 'string') fail('Log has no message');
  return { requestId: requestId as string | null, level: level as LogLevel, message: message as string };
}

/** Checks one frame from a worker against the channel's state; throws ProtocolViolation. */
export function readInbound(frame: Frame, channel: ChannelView): Inbound {
  const { type, stream } = frame;
  if (channel.spare === 'waiting') fail(`frame type ${type} from a spare waiting for its function`);
  if (channel.spare === 'announce') {
    if (type !== FrameType.Standby) fail(`frame type ${type} from a spare before Standby`);
    if (stream !== 0) fail('Standby on a stream');
    if (frame.payload.length !== 0) fail('Standby with a payload');
    return { type: 'standby' };
  }
  if (!channel.ready && type !== FrameType.Ready && type !== FrameType.Log) fail(`frame type ${type} before Ready`);
  switch (type) {
    case FrameType.Ready:
      if (channel.ready) fail('a second Ready');
      if (stream !== 0) fail('Ready on a stream');
      return { type: 'ready', info: readyInfo(frame) };
    case FrameType.ResponseHead:
      if (channel.response(stream) !== 'head') fail(`ResponseHead for stream ${stream}, which awaits none`);
      return { type: 'head', stream, head: responseHead(frame) };
    case FrameType.ResponseChunk:
      if (channel.response(stream) !== 'body')
        fail(`ResponseChunk for stream ${stream}, which has no response body open`);
      return { type: 'chunk', stream, bytes: frame.payload };
    case FrameType.ResponseEnd:
      if (channel.response(stream) !== 'body')
        fail(`ResponseEnd for stream ${stream}, which has no response body open`);
      if (frame.payload.length !== 0) fail('ResponseEnd with a payload');
      return { type: 'end', stream };
    case FrameType.ResponseError:
      if (channel.response(stream) === null) fail(`ResponseError for stream ${stream}, which the host did not open`);
      return { type: 'error', stream, failure: handlerFailure(frame) };
    case FrameType.CtxCall:
      if (stream <= channel.lastCall) fail(`CtxCall id ${stream} does not follow ${channel.lastCall}`);
      return { type: 'ctx', stream, call: ctxCall(frame) };
    case FrameType.Log:
      if (stream !== 0) fail('Log on a stream');
      return { type: 'log', entry: logEntry(frame) };
    default:
      return fail(`frame type ${type} is not accepted from a worker`);
  }
}
