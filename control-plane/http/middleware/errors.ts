// Renders every failure as {"error":{"code","message"}}. BerthErrors are shown as they are; errors
// raised by Koa or the router keep their status with a generic code; anything else is a bug, logged
// with the request id and shown as internal_error without its message.
import type Koa from 'koa';
import { BerthError, type ErrorCode, metadataUnavailable, storageUnavailable } from '../../errors.ts';
import { StorageUnavailableError } from '../../../storage/blob-driver.ts';
import type { Logger } from '../../log.ts';
import { isMetadataUnavailable } from '../../db/errors.ts';

const CODES_BY_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  501: 'not_implemented',
};

interface HttpishError {
  status?: number;
  expose?: boolean;
  message?: string;
  code?: string;
  headers?: Record<string, string>;
}

/** The BerthError a caller sees for any thrown value. */
export function toBerthError(err: unknown): { error: BerthError; internal: boolean } {
  if (err instanceof BerthError) return { error: err, internal: false };
  if (err instanceof URIError) {
    return { error: new BerthError('invalid_request', 'the URL contains invalid percent-encoding'), internal: false };
  }
  if (isMetadataUnavailable(err)) {
    return { error: metadataUnavailable(), internal: false };
  }
  if (err instanceof StorageUnavailableError) {
    return { error: storageUnavailable(), internal: false };
  }
  const e = (err ?? {}) as HttpishError;
  if (typeof e.status === 'number' && e.status >= 400 && e.status < 500 && e.expose) {
    return {
      error: new BerthError(CODES_BY_STATUS[e.status] ?? 'invalid_request', e.message ?? 'request failed'),
      internal: false,
    };
  }
  return {
    error: new BerthError('internal_error', 'internal error; the request id is in the Berth-Request-Id header'),
    internal: true,
  };
}

/** Logs what the operator must hear of a failure: a bug with its stack, an outage with its reason. */
export function logFailure(
  log: Pick<Logger, 'error' | 'warn'>,
  reqId: string,
  err: unknown,
  error: BerthError,
  internal: boolean,
): void {
  if (internal) log.error({ reqId, err }, 'unhandled error');
  else if (error.code === 'metadata_unavailable')
    log.warn({ reqId, reason: (err as Error).message }, 'the metadata database did not answer');
  else if (err instanceof StorageUnavailableError)
    log.warn({ reqId, reason: err.message }, 'the blob store did not answer');
}

/** A client that hung up mid-request is not a server failure. */
export function isClientAbort(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === 'ECONNRESET' || code === 'ECONNABORTED' || code === 'ERR_STREAM_PREMATURE_CLOSE';
}

export function errorEnvelope(log: Logger): Koa.Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      if (isClientAbort(err)) {
        log.info({ reqId: ctx.state.requestId }, 'client closed the connection mid-request');
        ctx.status = 499;
        return;
      }
      const { error, internal } = toBerthError(err);
      logFailure(log, ctx.state.requestId as string, err, error, internal);
      const headers = (err as HttpishError | null)?.headers;
      if (headers?.allow) ctx.set('Allow', headers.allow);
      ctx.status = error.status;
      ctx.body = {
        error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) },
        ...error.records,
      };
    }
  };
}
