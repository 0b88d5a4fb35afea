// The worker's main loop inside Deno: connect to the host's socket before the function's module is
// evaluated, give up the permission to touch that socket's path, load the function, announce
// readiness, then turn Request frames into web Requests and stream the Responses back. A spare
// connects and waits on standby until the host sends it its function's source (standby).
import { setImmediate } from 'node:timers';
import { currentRequest, hideHostPaths, setLogSink } from './harden.ts';
import { routeFetchThroughEgress } from './egress.ts';
import { type CallHost, createContext } from './context.ts';
import { listen, throughDbLine } from './db-line.ts';
import {
  CHUNK_BYTES,
  type ChannelParams,
  CtxErrorCode,
  type CtxResult,
  type Frame,
  FrameReader,
  type LogEntry,
  FrameType,
  type FrameTypeValue,
  type HandlerFailure,
  MAX_CTX_CALL_BYTES,
  MAX_FRAME_BYTES,
  MAX_LOG_CHARS,
  MAX_REQUEST_HEAD_BYTES,
  type ReadyInfo,
  dbLinePath,
  type ResponseHead,
  decodeJson,
  decodeLoad,
  decodeRequest,
  encodeFrame,
  encodeJson,
  joinBytes,
  shimPayloadBytes,
  writeAll,
} from '../runtime-host/protocol.ts';

type Handler = (req: Request, ctx: unknown) => unknown;

const MAX_BACKLOG_BYTES = 1024 * 1024;
/** Request frames carry bodies up to the largest body limit an operator may configure. */
const MAX_REQUEST_FRAME_BYTES = MAX_FRAME_BYTES + MAX_REQUEST_HEAD_BYTES;
const MAX_HEAD_BYTES = shimPayloadBytes(FrameType.ResponseHead);
const hostFrameBytes = (type: number): number =>
  type === FrameType.Request ? MAX_REQUEST_FRAME_BYTES : MAX_FRAME_BYTES;

/**
 * Writes frames in order. Frames queued before the next turn of the event loop go out in one write
 * (setImmediate: a 0 ms setTimeout costs about 2 ms in Deno),
 * so a small response's head, body and end cost one syscall, and busy workers batch across requests.
 * The promise resolves once the frame is written (Deno's conn.write may write part of a buffer).
 */
function createWriter(conn: Deno.Conn) {
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let flushing: Promise<void> | null = null;
  async function flush(): Promise<void> {
    while (pending.length > 0) {
      const batch = joinBytes(pending);
      pending = [];
      pendingBytes = 0;
      await writeAll(conn, batch);
    }
    flushing = null;
  }
  const send = (type: FrameTypeValue, stream: number, payload?: Uint8Array): Promise<void> => {
    const frame = encodeFrame(type, stream, payload);
    pending.push(frame);
    pendingBytes += frame.length;
    flushing ??= new Promise((resolve, reject) => setImmediate(() => flush().then(resolve, reject)));
    return flushing;
  };
  /** Waits for the socket only when much is queued, so streamed bodies cannot outrun it. */
  const drain = (): Promise<void> | undefined =>
    pendingBytes > MAX_BACKLOG_BYTES ? (flushing ?? undefined) : undefined;
  return { send, drain };
}

function failure(error: unknown): HandlerFailure {
  const e = error as { message?: unknown; code?: unknown; status?: unknown } | null;
  const message = typeof e?.message === 'string' ? e.message : String(error);
  const out: HandlerFailure = {
    message: message.length > MAX_LOG_CHARS ? `${message.slice(0, MAX_LOG_CHARS)}… (truncated)` : message,
  };
  if (typeof e?.code === 'string' && e.code.length <= 100) out.code = e.code;
  if (typeof e?.status === 'number' && Number.isInteger(e.status)) out.status = e.status;
  return out;
}

export interface Channel {
  conn: Deno.Conn;
  /** Where the site's database process connects, when the host has it open a line (db-line.ts). */
  db: Deno.Listener;
  siteId: string;
  kind: 'api' | 'cron';
}

/**
 * Opens the channel and listens where the site's database process may connect (db-line.ts);
 * afterwards nothing in this process can open, listen on or replace either path.
 */
async function open(socketPath: string): Promise<{ conn: Deno.Conn; db: Deno.Listener }> {
  const conn = await Deno.connect({ transport: 'unix', path: socketPath });
  Deno.permissions.revokeSync({ name: 'read', path: socketPath });
  Deno.permissions.revokeSync({ name: 'write', path: socketPath });
  Deno.permissions.revokeSync({ name: 'net', host: `unix:${socketPath}` });
  return { conn, db: listen(dbLinePath(socketPath)) };
}

export async function connect(params: ChannelParams): Promise<Channel> {
  hideHostPaths(params.functionUrl, params.sourcePath);
  routeFetchThroughEgress(params.egress);
  return { ...(await open(params.socketPath)), siteId: params.siteId, kind: params.kind };
}

/** A module's source as a data: URL, which Deno imports with no permission at all. */
const moduleUrl = (source: Uint8Array, language: 'ts' | 'js' = 'ts'): string =>
  `data:application/${language === 'js' ? 'javascript' : 'typescript'};base64,${source.toBase64()}`;

const WARM_UP = new TextEncoder().encode(
  'export default (request: Request): Response => new Response(request.body, { headers: request.headers });',
);

/**
 * Runs once, in a spare before it says it is on standby, what a worker's first call otherwise runs
 * for the first time (a TypeScript module imported from a data: URL, a Request with a body and a
 * signal, a streamed Response): Deno compiles and sets up that code then, and the call that takes
 * the spare pays about a third of what it would. Berth's own code only; nothing of it stays reachable.
 */
async function warmUp(): Promise<void> {
  const mod = (await import(moduleUrl(WARM_UP))) as { default: (request: Request) => Response };
  await currentRequest.run('warm-up', async () => {
    const request = new Request('http://localhost/', {
      method: 'POST',
      headers: [['content-type', 'text/plain']],
      body: new Uint8Array(1),
      signal: new AbortController().signal,
    });
    const response = mod.default(request);
    [...response.headers];
    const reader = response.body!.getReader();
    while (!(await reader.read()).done);
  });
}

/**
 * A spare: opens the channel, says it is on standby, and waits for the one function it will ever
 * serve. The host sends its source and its site (a Load frame); the module is imported from a data:
 * URL, which needs no permission, and stack traces show its site path instead, as for a module file.
 * (Deno caches a module's compiled form by its URL: a data: URL, made of the source, is cached once per
 * version, as a module file is.) A channel closed before that means the spare was not needed.
 */
export async function standby(socketPath: string): Promise<void> {
  const { conn, db } = await open(socketPath);
  await warmUp();
  const announce = encodeFrame(FrameType.Standby, 0);
  await writeAll(conn, announce);
  const reader = new FrameReader(hostFrameBytes);
  const chunks = conn.readable.getReader();
  let frames: Frame[] = [];
  while (frames.length === 0) {
    const read = await chunks.read();
    if (read.done) Deno.exit(0);
    frames = reader.push(read.value);
  }
  chunks.releaseLock();
  // The host sends nothing else before the worker says it is ready.
  if (frames.length !== 1 || frames[0]!.type !== FrameType.Load)
    throw new Error('the host sent a spare something other than its function');
  const { head, body } = decodeLoad(frames[0]!.payload);
  const functionUrl = moduleUrl(body, head.language);
  hideHostPaths(functionUrl, head.sourcePath);
  routeFetchThroughEgress(head.egress);
  await run({ conn, db, siteId: head.siteId, kind: head.kind }, () => import(functionUrl), reader);
}

const tooLarge = (what: string, limit: number) => `${what} is larger than ${limit} bytes once encoded`;

/** `reader` holds what a spare read of the channel before it was given its function. */
export async function run(
  channel: Channel,
  load: () => Promise<Record<string, unknown>>,
  reader = new FrameReader(hostFrameBytes),
): Promise<void> {
  const { conn, siteId, kind } = channel;
  const { send, drain } = createWriter(conn);
  const log = (entry: LogEntry) => void send(FrameType.Log, 0, encodeJson(entry));
  setLogSink(log);

  const mod = await load();
  const handlerName: ReadyInfo['handler'] = typeof mod.default === 'function' ? 'default' : 'handler';
  const handler = mod[handlerName] as Handler;
  if (typeof handler !== 'function') throw new Error('the function module exports no handler function');

  let nextCall = 1;
  const calls = new Map<number, (result: CtxResult) => void>();
  const callHost: CallHost = (method, args) => {
    const payload = encodeJson({ requestId: currentRequest.getStore() ?? null, method, args });
    if (payload.length > MAX_CTX_CALL_BYTES) {
      return Promise.resolve({
        ok: false,
        error: {
          code: CtxErrorCode.InvalidArgument,
          message: tooLarge(`ctx.${method}'s arguments`, MAX_CTX_CALL_BYTES),
        },
      });
    }
    const id = nextCall++;
    const result = new Promise<CtxResult>((resolve) => calls.set(id, resolve));
    void send(FrameType.CtxCall, id, payload);
    return result;
  };
  const requestId = () => currentRequest.getStore() ?? null;
  const ctx = createContext(siteId, throughDbLine(channel.db, callHost, requestId, log));
  const aborts = new Map<number, AbortController>();

  async function serve(stream: number, payload: Uint8Array): Promise<void> {
    const { head, body } = decodeRequest(payload);
    const abort = new AbortController();
    aborts.set(stream, abort);
    try {
      await currentRequest.run(head.requestId, async () => {
        const request = new Request(head.url, {
          method: head.method,
          headers: head.headers,
          body:
            head.method === 'GET' || head.method === 'HEAD' || body.length === 0
              ? null
              : (body as Uint8Array<ArrayBuffer>),
          signal: abort.signal,
        });
        let response: unknown;
        let responseHead: Uint8Array;
        try {
          response = await handler(request, ctx);
          // A cron handler need not answer anything.
          if (kind === 'cron' && response === undefined) response = new Response(null, { status: 204 });
          if (!(response instanceof Response)) throw new TypeError('the handler must return a Response');
          responseHead = encodeJson({ status: response.status, headers: [...response.headers] } satisfies ResponseHead);
          if (responseHead.length > MAX_HEAD_BYTES)
            throw new RangeError(tooLarge('the response’s status and headers', MAX_HEAD_BYTES));
        } catch (error) {
          console.error(error);
          void send(FrameType.ResponseError, stream, encodeJson(failure(error)));
          return;
        }
        void send(FrameType.ResponseHead, stream, responseHead);
        if (response.body) {
          try {
            const reader = response.body.getReader();
            for (let read = await reader.read(); !read.done; read = await reader.read()) {
              const chunk = read.value;
              for (let offset = 0; offset < chunk.length; offset += CHUNK_BYTES) {
                void send(FrameType.ResponseChunk, stream, chunk.subarray(offset, offset + CHUNK_BYTES));
                await drain();
              }
            }
          } catch (error) {
            console.error(error);
            void send(FrameType.ResponseError, stream, encodeJson(failure(error)));
            return;
          }
        }
        void send(FrameType.ResponseEnd, stream);
      });
    } finally {
      aborts.delete(stream);
    }
  }

  function dispatch(frame: Frame): void {
    switch (frame.type) {
      case FrameType.Request:
        void serve(frame.stream, frame.payload);
        break;
      case FrameType.CtxResult: {
        const resolve = calls.get(frame.stream);
        calls.delete(frame.stream);
        resolve?.(decodeJson<CtxResult>(frame.payload));
        break;
      }
      case FrameType.Cancel:
        aborts.get(frame.stream)?.abort();
        break;
    }
  }

  await send(FrameType.Ready, 0, encodeJson({ handler: handlerName } satisfies ReadyInfo));
  for await (const chunk of conn.readable) {
    for (const frame of reader.push(chunk)) dispatch(frame);
  }
  // The host closed the channel: this worker is done.
  Deno.exit(0);
}
