// Reads a JSON request body with a size cap. The Content-Type is not insisted on, so `curl -d` works;
// an empty body reads as {} so that validation names the missing fields.
import type http from 'node:http';
import { BerthError } from '../errors.ts';
import { readBody } from './read-body.ts';

export async function readJsonBody(ctx: { req: http.IncomingMessage }, maxBytes: number): Promise<unknown> {
  const bytes = await readBody(
    ctx,
    maxBytes,
    () => new BerthError('payload_too_large', `JSON bodies may be at most ${maxBytes} bytes`),
  );
  const text = bytes.toString('utf8').trim();
  if (text === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new BerthError('invalid_json', 'the request body is not valid JSON');
  }
}
