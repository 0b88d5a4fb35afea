// Reads a whole request body into memory, refusing it as soon as it passes `limit` bytes.
import type http from 'node:http';
import type { BerthError } from '../errors.ts';

const EMPTY = Buffer.alloc(0);

export async function readBody(
  ctx: { req: http.IncomingMessage },
  limit: number,
  tooLarge: () => BerthError,
): Promise<Buffer> {
  const { headers } = ctx.req;
  // A request with neither header has no body (RFC 9112, 6.3): nothing to wait for.
  if (
    headers['transfer-encoding'] === undefined &&
    (headers['content-length'] === undefined || headers['content-length'] === '0')
  )
    return EMPTY;
  if (Number(headers['content-length'] || 0) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
