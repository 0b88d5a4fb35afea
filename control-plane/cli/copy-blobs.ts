// `berth admin copy-blobs --to s3://…`: copies every blob a file version of a stopped instance
// references, and every finished export, into an object store, checking each blob by its SHA-256 as
// it is written; the source is only read. What the target has already is not copied again, so a copy
// that was interrupted, or run twice, goes on where it stopped. Only when all is there does it say how
// to switch.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { openBlobStore } from '../blob-stores.ts';
import { type Config, ConfigError, objectStoreLocation } from '../config.ts';
import { openMetadata } from '../db/metadata.ts';
import { formatBytes } from '../format-bytes.ts';
import { StartupError, blobStoreProblem } from '../startup-error.ts';
import { DataDirInUse, lockDataDir } from '../../storage/data-dir-lock.ts';
import { ContentStore } from '../../storage/content-store.ts';
import { S3Driver } from '../../storage/drivers/s3-driver.ts';
import { UsageError, copyTarget } from './usage-error.ts';

interface CopyReport {
  to: string;
  blobs: { copied: number; present: number; bytes: number };
  exports: { copied: number; present: number };
}

export async function runCopyBlobs(config: Config, args: string[]): Promise<{ json: unknown; text: string }> {
  const to = copyTarget(args);
  if (!to)
    throw new UsageError(
      '--to s3://<bucket>[/<prefix>] names the object store to copy into (its endpoint and region from BERTH_S3_*)',
    );
  let location;
  try {
    location = objectStoreLocation(to, process.env, '--to');
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
  const current = config.objectStore;
  if (
    current &&
    current.bucket === location.bucket &&
    current.prefix === location.prefix &&
    current.endpoint === location.endpoint
  ) {
    throw new UsageError(
      '--to names the object store BERTH_OBJECT_STORE already uses: the source and the target must differ',
    );
  }

  // A running server would go on writing blobs and versions while they are copied: it must be stopped.
  let lock;
  try {
    lock = lockDataDir(config.dataDir);
  } catch (err) {
    if (err instanceof DataDirInUse)
      throw new StartupError(`${err.message}: stop it first, so that no file changes while its blobs are copied`);
    throw err;
  }
  const source = openBlobStore(config);
  // Nothing is swept by this copy: the sweeper of the instance, once switched, is.
  const target = new ContentStore(new S3Driver(location));
  try {
    try {
      await target.init();
    } catch (err) {
      throw blobStoreProblem(err);
    }
    const metadata = await openMetadata(config, { create: false });
    let blobs: Array<{ sha: string; bytes: number }>;
    let exports: Array<{ id: string }>;
    try {
      blobs = (await metadata
        .db('file_versions')
        .select('blob_sha256 as sha')
        .max('bytes as bytes')
        .groupBy('blob_sha256')
        .orderBy('blob_sha256')) as Array<{ sha: string; bytes: number }>;
      exports = await metadata.db('database_exports').where({ status: 'COMPLETE' }).select('id').orderBy('id');
    } finally {
      await metadata.close();
    }
    const report: CopyReport = {
      to: target.location,
      blobs: { copied: 0, present: 0, bytes: 0 },
      exports: { copied: 0, present: 0 },
    };
    for (const { sha, bytes } of blobs) {
      const size = Number(bytes);
      if ((await target.sizeOf(sha)) === size) {
        report.blobs.present++;
        continue;
      }
      const stored = await target.put(await source.stream(sha), size);
      stored.unpin();
      if (stored.sha256 !== sha || stored.bytes !== size) {
        throw new StartupError(
          `blob ${sha} in ${source.location} does not hold the bytes it is named after (read ${stored.sha256}, ${stored.bytes} bytes): the source is damaged; nothing was switched`,
        );
      }
      report.blobs.copied++;
      report.blobs.bytes += size;
    }
    for (const { id } of exports) {
      if (await target.hasExport(id)) {
        report.exports.present++;
        continue;
      }
      const body = await source.openExport(id);
      if (!body) continue;
      const tmp = path.join(config.dataDir, `copy-blobs-${id}.sql.tmp`);
      try {
        await pipeline(body, fs.createWriteStream(tmp, { mode: 0o600 }));
        await target.putExport(id, tmp);
      } finally {
        fs.rmSync(tmp, { force: true });
      }
      report.exports.copied++;
    }
    const endpoint = location.endpoint ? ` BERTH_S3_ENDPOINT=${location.endpoint}` : '';
    const style = location.forcePathStyle ? ' BERTH_S3_FORCE_PATH_STYLE=true' : '';
    return {
      json: report,
      text: [
        `Copied into ${target.location}: ${report.blobs.copied} blobs (${formatBytes(report.blobs.bytes)}), ${report.exports.copied} exports;`,
        `  ${report.blobs.present} blobs and ${report.exports.present} exports were there already; all ${blobs.length} blobs the file versions reference are in it, each checked by its SHA-256 when copied`,
        'The source is unchanged. To switch, start Berth with the same data dir and metadata, and',
        `  BERTH_OBJECT_STORE=${to}${endpoint} BERTH_S3_REGION=${location.region}${style}`,
        '  (credentials from the AWS SDK’s chain, as for this command); the old blob folder can go once it serves.',
      ].join('\n'),
    };
  } catch (err) {
    throw blobStoreProblem(err);
  } finally {
    await target.close();
    await source.close();
    lock.release();
  }
}
