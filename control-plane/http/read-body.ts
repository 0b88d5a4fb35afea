// Reads a whole request body into memory, refusing it as soon as it passes `limit` bytes. It listens
// to the request's events rather than iterating it: an async iterator and its end-of-stream watch
// cost a small request more than the rest of reading its body.
import type http from 'node:http';
import type { BerthError } from '../errors.ts';

const EMPTY = Buffer.alloc(0);

/** What a request that was gone before its body was read fails with, as an abandoned stream would. */
const closedEarly = () => Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });

export async function readBody(
  ctx: { req: http.IncomingMessage },
  limit: number,
  tooLarge: () => BerthError,
): Promise<Buffer> {
  const { req } = ctx;
  const { headers } = req;
  // A request with neither header has no body (RFC 9112, 6.3): nothing to wait for.
  if (
    headers['transfer-encoding'] === undefined &&
    (headers['content-length'] === undefined || headers['content-length'] === '0')
  )
    return EMPTY;
  if (Number(headers['content-length'] || 0) > limit) throw tooLarge();
  if (req.destroyed) throw req.errored ?? closedEarly();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const settle = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total > limit) {
        // The rest of the body flows on to no one; the connection stays usable once it has passed.
        settle();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      settle();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const onError = (err: Error) => {
      settle();
      reject(err);
    };
    const onClose = () => {
      settle();
      reject(closedEarly());
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
