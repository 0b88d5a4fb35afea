// The worker's main loop inside Deno: connect to the host's socket, announce readiness, then turn
// Request frames into web Requests for the function and stream its Responses back.
import { currentRequest, setLogSink } from './harden.ts';
import { createContext } from './context.ts';
import {
  type CtxResult,
  type Frame,
  FrameReader,
  FrameType,
  type FrameTypeValue,
  type HandlerFailure,
  type ReadyInfo,
  type ResponseHead,
  decodeJson,
  decodeRequest,
  encodeFrame,
  encodeJson,
} from '../runtime-host/protocol.ts';

type Handler = (req: Request, ctx: unknown) => unknown;

const CHUNK_BYTES = 256 * 1024;

/** Writes frames in order; Deno's conn.write may write only part of a buffer. */
function createWriter(conn: Deno.Conn) {
  let queue = Promise.resolve();
  return (type: FrameTypeValue, stream: number, payload?: Uint8Array): Promise<void> => {
    const frame = encodeFrame(type, stream, payload);
    queue = queue.then(async () => {
      for (let written = 0; written < frame.length; ) written += await conn.write(frame.subarray(written));
    });
    return queue;
  };
}

function failure(error: unknown): HandlerFailure {
  const e = error as { message?: unknown; code?: unknown; status?: unknown } | null;
  const out: HandlerFailure = { message: typeof e?.message === 'string' ? e.message : String(error) };
  if (typeof e?.code === 'string') out.code = e.code;
  if (typeof e?.status === 'number') out.status = e.status;
  return out;
}

export async function run(mod: Record<string, unknown>): Promise<void> {
  const [socketPath, siteId] = Deno.args;
  if (!socketPath || !siteId) throw new Error('usage: entry.ts <socket path> <site id>');
  const handlerName: ReadyInfo['handler'] = typeof mod.default === 'function' ? 'default' : 'handler';
  const handler = mod[handlerName] as Handler;
  if (typeof handler !== 'function') throw new Error('the function module exports no handler function');

  const conn = await Deno.connect({ transport: 'unix', path: socketPath });
  const send = createWriter(conn);
  setLogSink((entry) => void send(FrameType.Log, 0, encodeJson(entry)));

  let nextCall = 1;
  const calls = new Map<number, (result: CtxResult) => void>();
  const ctx = createContext(siteId, (method, args) => {
    const id = nextCall++;
    const result = new Promise<CtxResult>((resolve) => calls.set(id, resolve));
    send(FrameType.CtxCall, id, encodeJson({ requestId: currentRequest.getStore() ?? null, method, args }));
    return result;
  });
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
          body: head.method === 'GET' || head.method === 'HEAD' || body.length === 0 ? null : (body as Uint8Array<ArrayBuffer>),
          signal: abort.signal,
        });
        let response: unknown;
        try {
          response = await handler(request, ctx);
          if (!(response instanceof Response)) throw new TypeError('the handler must return a Response');
        } catch (error) {
          console.error(error);
          await send(FrameType.ResponseError, stream, encodeJson(failure(error)));
          return;
        }
        const responseHead: ResponseHead = { status: response.status, headers: [...response.headers] };
        await send(FrameType.ResponseHead, stream, encodeJson(responseHead));
        if (response.body) {
          try {
            for await (const chunk of response.body) {
              for (let offset = 0; offset < chunk.length; offset += CHUNK_BYTES) {
                await send(FrameType.ResponseChunk, stream, chunk.subarray(offset, offset + CHUNK_BYTES));
              }
            }
          } catch (error) {
            console.error(error);
            await send(FrameType.ResponseError, stream, encodeJson(failure(error)));
            return;
          }
        }
        await send(FrameType.ResponseEnd, stream);
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
  const reader = new FrameReader();
  for await (const chunk of conn.readable) {
    for (const frame of reader.push(chunk)) dispatch(frame);
  }
  // The host closed the channel: this worker is done.
  Deno.exit(0);
}
