// ANY /api/<name> on a site: hands the request to the function's worker and streams its answer back.
// The platform's session cookie never reaches a function, and a function cannot set it.
import type Koa from 'koa';
import { BerthError, isErrorCode } from '../errors.ts';
import type { Deps } from '../services/deps.ts';
import { resolveEndpoint } from '../services/functions.ts';
import { readBody } from './read-body.ts';
import type { CachedSite } from '../services/hosting-cache.ts';
import { PoolFullError } from '../../runtime-host/pool.ts';
import { WorkerError } from '../../runtime-host/worker.ts';

export const SESSION_COOKIE = '_berth_session';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length']);
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/** The request's headers as pairs, minus hop-by-hop headers and the session cookie. */
export function functionRequestHeaders(rawHeaders: string[]): Array<[string, string]> {
  const headers: Array<[string, string]> = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    let value = rawHeaders[i + 1]!;
    if (HOP_BY_HOP.has(name)) continue;
    if (name === 'cookie') {
      value = value
        .split(';')
        .map((part) => part.trim())
        .filter((part) => part !== '' && part.split('=')[0]!.trim() !== SESSION_COOKIE)
        .join('; ');
      if (value === '') continue;
    }
    headers.push([name, value]);
  }
  return headers;
}

const setsSessionCookie = (value: string): boolean => value.split('=')[0]!.trim() === SESSION_COOKIE;

function toHttpError(err: unknown, deps: Deps, requestId: string): BerthError {
  if (err instanceof PoolFullError) return new BerthError('runtime_busy', 'all function workers are busy; try again shortly');
  if (err instanceof WorkerError) {
    switch (err.reason) {
      case 'handler': {
        const failure = err.failure;
        // An uncaught error with a code of Berth's own (e.g. from ctx.llm) answers as that error does.
        if (failure?.code && isErrorCode(failure.code)) return new BerthError(failure.code, failure.message);
        return new BerthError('function_error', 'the function threw an uncaught error; its logs have the details');
      }
      case 'timeout':
        return new BerthError('function_timeout', 'the function did not answer within its time limit');
      case 'memory':
        return new BerthError('function_memory_exceeded', 'the function exceeded its memory limit and was stopped');
      case 'protocol':
        return new BerthError('function_protocol_error', 'the function’s worker broke the runtime protocol and was stopped');
      default:
        return new BerthError('function_crashed', 'the function’s worker stopped before answering');
    }
  }
  deps.log.error({ err, reqId: requestId }, 'function worker failed to start');
  return new BerthError('function_start_failed', 'the function could not be started');
}

export async function invokeFunction(ctx: Koa.Context, deps: Deps, site: CachedSite, name: string): Promise<void> {
  const deployment = await resolveEndpoint(deps, site.id, name);
  if (!deployment) throw new BerthError('function_not_found', `no function named "${name}" is deployed on this site`);
  const limit = deps.config.maxFunctionBodyBytes;
  const body = await readBody(ctx, limit, () => new BerthError('payload_too_large', `function request bodies may be at most ${limit} bytes`));
  const requestId = ctx.state.requestId as string;

  const abort = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) abort.abort();
  });
  let response;
  try {
    response = await deps.runtime.invoke(
      deployment,
      { method: ctx.method, url: ctx.href, headers: functionRequestHeaders(ctx.req.rawHeaders), body, requestId },
      abort.signal,
    );
  } catch (err) {
    throw toHttpError(err, deps, requestId);
  }

  ctx.status = response.status;
  let contentType: string | undefined;
  for (const [name, value] of response.headers) {
    if (HOP_BY_HOP.has(name)) continue;
    if (name === 'set-cookie') {
      if (!setsSessionCookie(value)) ctx.append('Set-Cookie', value);
    } else if (name === 'content-type') {
      contentType = value;
    } else {
      ctx.set(name, value);
    }
  }
  if (NULL_BODY_STATUSES.has(response.status) || ctx.method === 'HEAD') {
    if (!Buffer.isBuffer(response.body)) response.body.resume();
    return;
  }
  ctx.body = response.body;
  if (contentType) ctx.set('Content-Type', contentType);
  else ctx.remove('Content-Type');
}
