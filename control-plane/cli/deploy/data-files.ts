// The project's data/ files, written one by one through the file API: they are the functions' own, so
// no deployment carries, prunes or rolls them back.
import fs from 'node:fs';
import { type ApiClient, encodePath } from '../api-client.ts';
import { formatBytes } from '../../format-bytes.ts';
import type { Site } from '../site.ts';
import { type FileFailure, fileFailure } from './file-failure.ts';
import { CONCURRENT_UPLOADS, eachLimited } from './lanes.ts';
import type { Upload } from './plan.ts';

export interface DataProgress {
  done(path: string, outcome: 'uploaded' | 'deleted' | 'failed', detail: string, count: number, total: number): void;
}

export interface DataWrites {
  uploaded: Array<{ path: string; bytes: number; versionId: string }>;
  deleted: string[];
  failed: FileFailure[];
}

export async function writeDataFiles(
  api: ApiClient,
  site: Site,
  uploads: Upload[],
  deletes: string[],
  progress: DataProgress,
): Promise<DataWrites> {
  const objects = `buckets/${site.bucketId}/objects`;
  const writes: DataWrites = { uploaded: [], deleted: [], failed: [] };
  const total = uploads.length + deletes.length;
  let count = 0;
  const attempt = async (path: string, work: () => Promise<string>, outcome: 'uploaded' | 'deleted') => {
    try {
      const detail = await work();
      progress.done(path, outcome, detail, ++count, total);
    } catch (err) {
      const error = fileFailure(err);
      writes.failed.push({ path, error });
      progress.done(path, 'failed', `${error.message} (${error.code})`, ++count, total);
    }
  };

  await eachLimited(uploads, CONCURRENT_UPLOADS, (item) =>
    attempt(
      item.file.path,
      async () => {
        const written = await api.put<{ bytes: number; versionId: string }>(
          `${objects}/${encodePath(item.file.path)}`,
          fs.createReadStream(item.file.absolute),
          { contentType: item.contentType, bytes: item.file.bytes, ifMatch: item.remote?.currentVersionId },
        );
        writes.uploaded.push({ path: item.file.path, bytes: written.bytes, versionId: written.versionId });
        return formatBytes(written.bytes);
      },
      'uploaded',
    ),
  );
  await eachLimited(deletes, CONCURRENT_UPLOADS, (path) =>
    attempt(
      path,
      async () => {
        await api.delete(`${objects}/${encodePath(path)}`);
        writes.deleted.push(path);
        return 'deleted';
      },
      'deleted',
    ),
  );
  writes.uploaded.sort((a, b) => a.path.localeCompare(b.path));
  writes.failed.sort((a, b) => a.path.localeCompare(b.path));
  writes.deleted.sort();
  return writes;
}
