// Reads a whole request body into memory, refusing it as soon as it passes `limit` bytes.
import type http from 'node:http';
import type Koa from 'koa';
import type { BerthError } from '../errors.ts';

export async function readBody(ctx: Koa.Context | { req: http.IncomingMessage }, limit: number, tooLarge: () => BerthError): Promise<Buffer> {
  if (Number(ctx.req.headers['content-length'] || 0) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
