// Which blob store an instance uses: the object store when BERTH_OBJECT_STORE names one, else the
// blob directory; either is the one content-addressed store (storage/content-store.ts) over its
// driver, behind the in-memory cache of small blobs.
import path from 'node:path';
import type { CachingBlobStore } from '../storage/blob-store.ts';
import { CachedBlobStore } from '../storage/cached-blob-store.ts';
import { ContentStore } from '../storage/content-store.ts';
import { LocalDriver } from '../storage/drivers/local-driver.ts';
import { S3Driver } from '../storage/drivers/s3-driver.ts';
import { blobDirOf, type Config } from './config.ts';

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
