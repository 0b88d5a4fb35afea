// The blob sweeper (storage/blob-sweeper.ts) as Berth runs it: a blob is referenced while a file
// version holds it or an upload of a deployment still open does (deployments.ts deletes the upload rows
// when it publishes, fails or expires), read from committed metadata; what each sweep removed, logged.
import { BlobSweeper } from '../../storage/blob-sweeper.ts';
import { logJobFailure } from '../db/errors.ts';
import type { Deps } from './deps.ts';

const REFERENCED =
  'SELECT 1 AS held FROM file_versions WHERE blob_sha256 = ? UNION ALL SELECT 1 AS held FROM deployment_uploads WHERE sha256 = ? LIMIT 1';

/** Starts sweeping every `BERTH_BLOB_SWEEP_MS`; null when that is 0 (never). */
export function sweepUnreferencedBlobs(deps: Pick<Deps, 'blobs' | 'hotSql' | 'log' | 'config'>): BlobSweeper | null {
  const { blobSweepMs } = deps.config;
  if (blobSweepMs === 0) return null;
  const sweeper = new BlobSweeper(
    deps.blobs,
    async (sha256) => (await deps.hotSql.get(REFERENCED, sha256, sha256)) !== undefined,
    blobSweepMs,
  );
  sweeper.start(
    blobSweepMs,
    ({ removed, bytes, leftovers, restored }) => {
      if (restored > 0)
        deps.log.warn({ blobs: restored }, 'put back removed blobs that a write on another node had stored again');
      if (removed > 0 || leftovers > 0)
        deps.log.info({ blobs: removed, bytes, leftovers }, 'removed blobs no file version references');
    },
    (err) => logJobFailure(deps.log, err, 'sweeping unreferenced blobs failed'),
  );
  return sweeper;
}
