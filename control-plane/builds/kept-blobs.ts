// Bytes a build keeps (a built module, an npm package's tarball) stored as a blob and referenced by a row
// written in the same step: the store is asked whether the blob is still there before the transaction,
// and the transaction commits only while every sweeper stays off it (storage/blob-store.ts), as a file
// write commits its version.
import { Readable } from 'node:stream';
import type { StoredBlob } from '../../storage/blob-store.ts';
import type { HotTx } from '../db/hot-sql.ts';
import type { Deps } from '../deps.ts';
import { BerthError } from '../errors.ts';

const ATTEMPTS = 3;

/** Stores `bytes` and runs `reference` for its blob in a write transaction; what `reference` returns. */
export async function keepReferenced<T>(
  deps: Pick<Deps, 'blobs' | 'hotSql'>,
  bytes: Buffer,
  reference: (sql: HotTx, blob: StoredBlob) => Promise<T>,
): Promise<T> {
  const blob = await deps.blobs.put(Readable.from([bytes]), bytes.length, bytes.length);
  try {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      if (!(await deps.blobs.stillStored(blob))) break;
      const kept = await deps.hotSql.write(async (sql) =>
        deps.blobs.keeps(blob) ? { value: await reference(sql, blob) } : null,
      );
      if (kept) return kept.value;
    }
  } finally {
    blob.unpin();
  }
  throw new BerthError('storage_unavailable', 'what a build made could not be stored; deploy again');
}
