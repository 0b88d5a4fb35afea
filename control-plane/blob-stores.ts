// Which blob store an instance uses: the object store when BERTH_OBJECT_STORE names one, else the
// blob directory; either behind the in-memory cache of small blobs.
import path from 'node:path';
import { CachedBlobStore } from '../storage/cached-blob-store.ts';
import { LocalBlobStore } from '../storage/local-blob-store.ts';
import { S3BlobStore } from '../storage/s3-blob-store.ts';
import { LocalDriver } from '../storage/drivers/local-driver.ts';
import { blobDirOf, type Config } from './config.ts';

/** How long an unreferenced blob is kept at least, when the sweeper is off: a day. */
const SAFE_AGE_WITHOUT_SWEEPER_MS = 24 * 3600_000;

export function openBlobStore(config: Config): CachedBlobStore {
  const store = config.objectStore
    ? new S3BlobStore(config.objectStore, config.blobSweepMs || SAFE_AGE_WITHOUT_SWEEPER_MS)
    : new LocalBlobStore(blobDirOf(config), path.join(config.dataDir, 'exports'));
  return new CachedBlobStore(store, config.blobCacheBytes);
}

/**
 * The blob directory as Berth lays it out: blobs fanned out in it (`<aa>/<sha256>`), database copies in
 * its `database-copies/`, and exports in the data dir's `exports/`, which may be on another file system.
 */
export function localBlobDriver(blobDir: string, exportsDir: string): LocalDriver {
  return new LocalDriver({ root: blobDir, folders: { blobs: blobDir, exports: exportsDir }, fanOut: ['blobs'] });
}
