// Reads a JSON request body with a size cap. The Content-Type is not insisted on, so `curl -d` works;
// an empty body reads as {} so that validation names the missing fields.
import type Koa from 'koa';
import { BerthError } from '../errors.ts';

export async function readJsonBody(ctx: Koa.Context, maxBytes: number): Promise<unknown> {
  const declared = Number(ctx.get('Content-Length') || 0);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new BerthError('invalid_json', 400, 'the request body is not valid JSON');
  }
}

const tooLarge = (maxBytes: number) =>
  new BerthError('payload_too_large', 413, `JSON bodies may be at most ${maxBytes} bytes`);
