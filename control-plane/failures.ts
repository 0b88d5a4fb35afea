// What a failure means to whoever asked, the same at every front door (REST, the lean site paths, MCP):
// a BerthError is shown as it is; the metadata server or the blob store not answering is an outage the
// caller may retry; anything else is a bug, logged with its stack and hidden behind internal_error.
import { BerthError, metadataUnavailable, storageUnavailable } from './errors.ts';
import { isMetadataUnavailable } from './db/errors.ts';
import type { Logger } from './log.ts';
import { StorageUnavailableError } from '../storage/blob-driver.ts';

/** The BerthError a caller sees for `err`, or null when it is none of Berth's own (a front door's or a bug). */
export function knownFailure(err: unknown): BerthError | null {
  if (err instanceof BerthError) return err;
  if (isMetadataUnavailable(err)) return metadataUnavailable();
  if (err instanceof StorageUnavailableError) return storageUnavailable();
  return null;
}

/** Logs what the operator must hear of a failure: a bug with its stack, an outage with its reason. */
export function logFailure(
  log: Pick<Logger, 'error' | 'warn'>,
  context: Record<string, unknown>,
  err: unknown,
  error: BerthError,
  internal: boolean,
): void {
  if (internal) log.error({ ...context, err }, 'unhandled error');
  else if (error.code === 'metadata_unavailable')
    log.warn({ ...context, reason: (err as Error).message }, 'the metadata database did not answer');
  else if (err instanceof StorageUnavailableError)
    log.warn({ ...context, reason: err.message }, 'the blob store did not answer');
}
