// `berth admin backup`: one archive file of a data dir, taken while its server keeps serving and writing.
//
// Consistency: the metadata is copied first, with SQLite's online backup API (or, for metadata on
// PostgreSQL, row by row from one snapshot into a SQLite file of the same schema: an archive always
// holds meta.sqlite), and everything else is chosen from that copy, never from the live database. Each site database is then copied the same way.
// The blobs are the ones the copied metadata's file versions reference. Blobs are content-addressed and
// never rewritten or deleted (the blob store has no delete, and versions are immutable), so a blob
// the copy references is on disk for as long as the backup runs and its bytes are the ones the copy
// means; the backup still hashes every blob it archives and stops if one does not match its name.
// Uploads that land after the metadata copy add blobs nobody in the copy references: they are left out.
//
// A site database deleted while the backup runs (its row is gone from the live metadata before its
// file) is left out, and its row is taken out of the copy, as the deletion would have done a moment
// later. A finished export whose file is missing is marked failed in the copy.
//
// The archive is written to a temporary file beside the target, fsynced, then renamed over it, so the
// target is always either the previous archive or the whole new one. Mode 0600.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { KeyWrapError, MASTER_KEY_BYTES, keyFingerprint, wrapMasterKey } from './key-wrap.ts';
import { ownedPrefix, sweepDeadLeftovers } from './leftovers.ts';
import {
  BackupError,
  type BackupContents,
  type BackupHeader,
  FORMAT,
  FORMAT_VERSION,
  HEADER_NAME,
  MANIFEST_NAME,
  MANIFEST_SUM_NAME,
  META_NAME,
  type Manifest,
  type ManifestFile,
  type MasterKeyMode,
  WRAPPED_KEY_NAME,
  blobMember,
  exportMember,
  siteDbMember,
} from './layout.ts';
import { type SnapshotOptions, type SnapshotReport, SnapshotSourceMissing, openSnapshot, snapshotDatabase } from './sqlite-snapshot.ts';
import { TarWriter } from './tar.ts';
import { errnoCode, syncPath } from '../durable.ts';

export interface BackupOptions {
  dataDir: string;
  /** Where the blobs are (default <data dir>/blobs) and the master key file (default <data dir>/master.key). */
  blobDir?: string;
  masterKeyFile?: string;
  /**
   * Writes a consistent SQLite copy of the metadata to `target`; by default the online backup of
   * <data dir>/meta.sqlite.
   */
  copyMetadata?: (target: string) => Promise<SnapshotReport>;
  /** The archive to write; replaced atomically if it exists. */
  file: string;
  berthVersion: string;
  /** Left out, or wrapped with a passphrase. */
  masterKey: { mode: 'omitted' } | { mode: 'wrapped'; passphrase: string };
  now?: () => Date;
  snapshot?: SnapshotOptions;
}

export interface BackupReport {
  file: string;
  bytes: number;
  /** SHA-256 of the whole archive, to compare a copy with. */
  sha256: string;
  createdAt: string;
  berthVersion: string;
  schema: Manifest['schema'];
  masterKey: MasterKeyMode;
  contents: BackupContents;
  /** Site databases deleted while the backup ran, left out of it. */
  deletedDuringBackup: string[];
  /** How the SQLite copies went: restarts caused by concurrent writes. */
  snapshots: { meta: SnapshotReport; siteDatabases: number; restarts: number };
}

const READ_CHUNK = 1024 * 1024;

async function* chunksOf(handle: FileHandle): AsyncIterable<Buffer> {
  let position = 0;
  for (;;) {
    const buffer = Buffer.allocUnsafe(READ_CHUNK);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) return;
    position += bytesRead;
    yield buffer.subarray(0, bytesRead);
  }
}


function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

export async function createBackup(options: BackupOptions): Promise<BackupReport> {
  const dataDir = path.resolve(options.dataDir);
  const file = path.resolve(options.file);
  const outDir = path.dirname(file);
  const createdAt = (options.now?.() ?? new Date()).toISOString();
  const blobDir = path.resolve(options.blobDir ?? path.join(dataDir, 'blobs'));
  const keyFile = path.resolve(options.masterKeyFile ?? path.join(dataDir, 'master.key'));

  if (!fs.existsSync(dataDir)) throw new BackupError('not_a_data_dir', `there is no data dir at ${dataDir}: set BERTH_DATA_DIR to the server's data dir`);
  if (!options.copyMetadata && !fs.existsSync(path.join(dataDir, META_NAME))) {
    throw new BackupError('not_a_data_dir', `${dataDir} holds no Berth data (no ${META_NAME}): set BERTH_DATA_DIR to the server's data dir`);
  }
  if (isInside(file, dataDir)) {
    throw new BackupError('backup_inside_data_dir', `the backup would be written inside the data dir ${dataDir}, and lost with it: write it somewhere else`);
  }
  let outDirStat: fs.Stats;
  try {
    outDirStat = await fsp.stat(outDir);
  } catch {
    throw new BackupError('no_such_folder', `the folder ${outDir} does not exist: create it first`);
  }
  if (!outDirStat.isDirectory()) throw new BackupError('no_such_folder', `${outDir} is not a folder`);
  if (fs.existsSync(file) && !(await fsp.stat(file)).isFile()) throw new BackupError('not_a_file', `${file} exists and is not a file`);

  let masterKey: Buffer;
  try {
    masterKey = await fsp.readFile(keyFile);
  } catch {
    throw new BackupError('no_master_key', `${keyFile} cannot be read: a data dir without its master key cannot be backed up whole`);
  }
  if (masterKey.length !== MASTER_KEY_BYTES) throw new BackupError('no_master_key', `${keyFile} is not a ${MASTER_KEY_BYTES}-byte key`);
  const wrapped = options.masterKey.mode === 'wrapped' ? await wrapMasterKey(masterKey, options.masterKey.passphrase) : null;

  // Named after this process, so the next backup here can tell a killed backup's leftovers from a live one's.
  const stems = ['.berth-backup-', `.${path.basename(file)}.`];
  await sweepDeadLeftovers(outDir, stems);
  const work = await fsp.mkdtemp(path.join(outDir, ownedPrefix(stems[0]!)));
  const tmpFile = path.join(outDir, `${ownedPrefix(stems[1]!)}${crypto.randomBytes(6).toString('hex')}.tmp`);
  let archive: FileHandle | null = null;
  let renamed = false;
  try {
    // 1. The metadata, and from that copy the list of everything else.
    const metaCopy = path.join(work, META_NAME);
    let metaReport: SnapshotReport;
    try {
      metaReport = options.copyMetadata ? await options.copyMetadata(metaCopy) : await snapshotDatabase(path.join(dataDir, META_NAME), metaCopy, options.snapshot);
    } catch (err) {
      throw new BackupError('snapshot_failed', `the metadata (${options.copyMetadata ? 'on PostgreSQL' : path.join(dataDir, META_NAME)}) could not be copied: ${(err as Error).message}`);
    }
    const meta = openSnapshot(metaCopy);
    let migrations: string[];
    let databases: Array<{ id: string; site_id: string; status: string }>;
    let exportsDone: Array<{ id: string }>;
    let blobs: string[];
    const contents: BackupContents = { sites: 0, fileVersions: 0, blobs: 0, siteDatabases: 0, exports: 0 };
    const deletedDuringBackup: string[] = [];
    const siteDbs: string[] = [];
    let restarts = metaReport.restarts;
    try {
      meta.check();
      migrations = meta.all<{ name: string }>('SELECT name FROM knex_migrations ORDER BY id').map((r) => r.name);
      databases = meta.all('SELECT id, site_id, status FROM databases ORDER BY site_id');
      exportsDone = meta.all("SELECT id FROM database_exports WHERE status = 'COMPLETE' ORDER BY id");
      blobs = meta.all<{ sha: string }>('SELECT DISTINCT blob_sha256 AS sha FROM file_versions ORDER BY sha').map((r) => r.sha);
      contents.sites = meta.all<{ n: number }>('SELECT count(*) AS n FROM sites')[0]!.n;
      contents.fileVersions = meta.all<{ n: number }>('SELECT count(*) AS n FROM file_versions')[0]!.n;

      // 2. Each site database the copy knows, as a snapshot of its own.
      for (const database of databases) {
        const source = path.join(dataDir, 'sites', database.site_id, 'db.sqlite');
        const copy = path.join(work, siteDbMember(database.site_id));
        await fsp.mkdir(path.dirname(copy), { recursive: true, mode: 0o700 });
        try {
          const report = await snapshotDatabase(source, copy, options.snapshot);
          restarts += report.restarts;
        } catch (err) {
          if (!(err instanceof SnapshotSourceMissing)) {
            throw new BackupError('snapshot_failed', `the database of site ${database.site_id} could not be copied: ${(err as Error).message}`);
          }
          await fsp.rm(path.dirname(copy), { recursive: true, force: true });
          // PROVISIONING: the next create makes it. READY: deleted since the metadata was copied.
          if (database.status === 'READY') {
            meta.run('DELETE FROM database_deletion_challenges WHERE database_id = ?', [database.id]);
            meta.run('DELETE FROM migration_leases WHERE database_id = ?', [database.id]);
            meta.run('DELETE FROM databases WHERE id = ?', [database.id]);
            deletedDuringBackup.push(database.site_id);
          }
          continue;
        }
        const siteDb = openSnapshot(copy);
        try {
          siteDb.check();
        } catch (err) {
          throw new BackupError('snapshot_failed', `the database of site ${database.site_id}: ${(err as Error).message}`);
        } finally {
          siteDb.close();
        }
        siteDbs.push(database.site_id);
      }

      // 3. Finished exports whose file is gone cannot be offered after a restore.
      const present: string[] = [];
      for (const { id } of exportsDone) {
        if (fs.existsSync(path.join(dataDir, exportMember(id)))) present.push(id);
        else meta.run("UPDATE database_exports SET status = 'ERROR', error = ? WHERE id = ?", ['the export file was missing when the backup was taken; create a new one', id]);
      }
      exportsDone = present.map((id) => ({ id }));
    } finally {
      meta.close();
    }
    contents.siteDatabases = siteDbs.length;
    contents.exports = exportsDone.length;
    contents.blobs = blobs.length;

    // 4. The archive.
    archive = await fsp.open(tmpFile, 'wx', 0o600);
    const tar = new TarWriter(archive, new Date(createdAt));
    const files: ManifestFile[] = [];
    const header: BackupHeader = { format: FORMAT, formatVersion: FORMAT_VERSION, berthVersion: options.berthVersion, createdAt, masterKey: options.masterKey.mode };
    files.push(await tar.addBuffer(HEADER_NAME, Buffer.from(`${JSON.stringify(header, null, 2)}\n`)));

    const addFile = async (member: string, source: string): Promise<ManifestFile> => {
      const handle = await fsp.open(source, 'r');
      try {
        const { size } = await handle.stat();
        return await tar.add(member, size, chunksOf(handle));
      } finally {
        await handle.close();
      }
    };
    files.push(await addFile(META_NAME, metaCopy));
    for (const siteId of siteDbs) files.push(await addFile(siteDbMember(siteId), path.join(work, siteDbMember(siteId))));
    for (const { id } of exportsDone) files.push(await addFile(exportMember(id), path.join(dataDir, exportMember(id))));
    for (const sha256 of blobs) {
      const member = blobMember(sha256);
      let written: ManifestFile;
      try {
        written = await addFile(member, path.join(blobDir, path.relative('blobs', member)));
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT') throw err;
        throw new BackupError('blob_missing', `blob ${sha256}, which stored file versions reference, is missing from ${blobDir}: the data dir is damaged`);
      }
      if (written.sha256 !== sha256) {
        throw new BackupError('blob_damaged', `blob ${sha256} in ${blobDir} no longer holds the bytes it is named after: the data dir is damaged`);
      }
      files.push(written);
    }
    if (wrapped) files.push(await tar.addBuffer(WRAPPED_KEY_NAME, Buffer.from(`${JSON.stringify(wrapped, null, 2)}\n`)));

    const manifest: Manifest = {
      ...header,
      schema: { migrations, latest: migrations.at(-1) ?? null },
      masterKeyFingerprint: keyFingerprint(masterKey),
      contents,
      files,
    };
    const manifestBytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
    const manifestSum = await tar.addBuffer(MANIFEST_NAME, manifestBytes);
    await tar.addBuffer(MANIFEST_SUM_NAME, Buffer.from(`${manifestSum.sha256}\n`));
    const archiveSha256 = await tar.finish();
    await archive.sync();
    const bytes = tar.bytes;
    await archive.close();
    archive = null;

    await fsp.rename(tmpFile, file);
    renamed = true;
    await syncPath(outDir);

    return {
      file,
      bytes,
      sha256: archiveSha256,
      createdAt,
      berthVersion: options.berthVersion,
      schema: manifest.schema,
      masterKey: options.masterKey.mode,
      contents,
      deletedDuringBackup,
      snapshots: { meta: metaReport, siteDatabases: siteDbs.length, restarts },
    };
  } catch (err) {
    if (err instanceof KeyWrapError) throw new BackupError('master_key', err.message);
    throw err;
  } finally {
    if (archive) await archive.close().catch(() => {});
    if (!renamed) await fsp.rm(tmpFile, { force: true });
    await fsp.rm(work, { recursive: true, force: true });
  }
}
