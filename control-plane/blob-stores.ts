// Which blob store an instance uses: the object store when BERTH_OBJECT_STORE names one, else the
// blob directory; either is the one content-addressed store (storage/content-store.ts) over its
// driver, behind the in-memory cache of small blobs. And its sweeper as Berth runs it: a blob is
// referenced while a file version holds it, an upload of a deployment still open does
// (deployments.ts deletes the upload rows when it publishes, fails or expires), a build made it, it is
// an npm package a build used, or a site's builds hold it (builds/: a build or package no site holds is
// forgotten once unused for a sweep's age), read from committed metadata; what each sweep removed, logged. The store and the sweeper are two parts of a start (part.ts).
import path from 'node:path';
import type { CachingBlobStore } from '../storage/blob-store.ts';
import { BlobSweeper } from '../storage/blob-sweeper.ts';
import { CachedBlobStore } from '../storage/cached-blob-store.ts';
import { ContentStore } from '../storage/content-store.ts';
import { LocalDriver } from '../storage/drivers/local-driver.ts';
import { S3Driver } from '../storage/drivers/s3-driver.ts';
import { blobDirOf, type Config } from './config.ts';
import { logJobFailure } from './db/errors.ts';
import type { Deps } from './deps.ts';
import type { Part } from './part.ts';
import { blobStoreProblem } from './startup-error.ts';

/** How long an unreferenced blob is kept at least, when the sweeper is off: a day. */
const SAFE_AGE_WITHOUT_SWEEPER_MS = 24 * 3600_000;

/**
 * The blob directory as Berth lays it out: blobs fanned out in it (`<aa>/<sha256>`), and exports in the
 * data dir's `exports/`, which may be on another file system.
 */
export function localBlobDriver(blobDir: string, exportsDir: string): LocalDriver {
  return new LocalDriver({ root: blobDir, folders: { blobs: blobDir, exports: exportsDir }, fanOut: ['blobs'] });
}

/**
 * A commit on the object store trusts a write younger than the sweeper's minimum age without asking
 * the store again; the directory answers at once, so it is always asked.
 */
export function openBlobStore(config: Config): CachingBlobStore {
  const store = config.objectStore
    ? new ContentStore(new S3Driver(config.objectStore), {
        safeAgeMs: config.blobSweepMs || SAFE_AGE_WITHOUT_SWEEPER_MS,
      })
    : new ContentStore(localBlobDriver(blobDirOf(config), path.join(config.dataDir, 'exports')));
  return new CachedBlobStore(store, config.blobCacheBytes);
}

const REFERENCED =
  'SELECT 1 AS held FROM file_versions WHERE blob_sha256 = ? UNION ALL SELECT 1 AS held FROM deployment_uploads WHERE sha256 = ? UNION ALL SELECT 1 AS held FROM builds WHERE module_sha256 = ? UNION ALL SELECT 1 AS held FROM npm_packages WHERE tarball_sha256 = ? UNION ALL SELECT 1 AS held FROM site_build_blobs WHERE sha256 = ? LIMIT 1';

/** Starts sweeping every `BERTH_BLOB_SWEEP_MS`; null when that is 0 (never). */
export function sweepUnreferencedBlobs(deps: Pick<Deps, 'blobs' | 'hotSql' | 'log' | 'config'>): BlobSweeper | null {
  const { blobSweepMs } = deps.config;
  if (blobSweepMs === 0) return null;
  const sweeper = new BlobSweeper(
    deps.blobs,
    async (sha256) => (await deps.hotSql.get(REFERENCED, sha256, sha256, sha256, sha256, sha256)) !== undefined,
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

/** The blob store's part of a start: first of the parts after the data dir, so a store that cannot be used stops the start with nothing else opened. */
export const blobsPart: Part = {
  name: 'the blob store',
  async open(_deps, { config, stack }) {
    const blobs = openBlobStore(config);
    stack.defer('the blob store', () => blobs.close());
    try {
      await blobs.init();
    } catch (err) {
      throw blobStoreProblem(err);
    }
    return { blobs };
  },
};

/** The sweeper's part: started last, once every part that references blobs is. */
export const sweeperPart: Part = {
  name: 'the blob sweeper',
  start(deps, stack) {
    const sweeper = sweepUnreferencedBlobs(deps);
    if (sweeper) stack.defer('the blob sweeper', () => sweeper.stop());
  },
};
