// `berth admin backup`: one archive file of a data dir, taken while its server keeps serving and writing.
//
// Consistency: the metadata is copied first, with SQLite's online backup API (or, for metadata on
// PostgreSQL, row by row from one snapshot into a SQLite file of the same schema: an archive always
// holds meta.sqlite), and everything else is chosen from that copy, never from the live database. Each site database is then copied the same way.
// The blobs are the ones the copied metadata's file versions reference, read through the blob store
// (the blob directory or the object store). Blobs are content-addressed and never rewritten, and the
// sweeper removes one only an hour (BERTH_BLOB_SWEEP_MS) after the last version referencing it was
// deleted, so a blob the copy references stays for as long as the backup runs and its bytes are the
// ones the copy means; the backup still hashes every blob it archives and stops if one does not match
// its name. Uploads that land after the metadata copy add blobs nobody in the copy references: they
// are left out. On an object store the operator may leave the blobs there instead: the archive then
// lists their digests, each checked present in the store, and a restore checks them again.
//
// The site databases' replicas, when the instance keeps them in a folder, are carried as the files are
// at the moment each is read (see addReplicaFiles); in an object store they stay, and the manifest
// says where. Either way the manifest records when each site database's snapshot was finished, so a
// restore can tell whether a replica holds a later state.
//
// A site database deleted while the backup runs (its row is gone from the live metadata before its
// file) is left out, and its row is taken out of the copy, as the deletion would have done a moment
// later. A finished export the store no longer has is marked failed in the copy.
//
// The archive is written to a temporary file beside the target, fsynced, then renamed over it, so the
// target is always either the previous archive or the whole new one. Mode 0600.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
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
  STORE_BLOBS_NAME,
  type Manifest,
  type ManifestFile,
  type MasterKeyMode,
  type ObjectStoreRecord,
  type ReplicasRecord,
  WRAPPED_KEY_NAME,
  blobMember,
  exportMember,
  siteDbMember,
} from './layout.ts';
import {
  type SnapshotOptions,
  type SnapshotReport,
  SnapshotSourceMissing,
  openSnapshot,
  snapshotDatabase,
} from './sqlite-snapshot.ts';
import { TarWriter, fileChunks } from './tar.ts';
import { addReplicaFiles } from './replica-files.ts';
import { errnoCode, syncPath } from '../durable.ts';

/** What a backup reads of the instance's blob store. */
export interface BackupBlobSource {
  /** Where the blobs are, for messages. */
  readonly location: string;
  stream(sha256: string): Promise<Readable>;
  has(sha256: string): Promise<boolean>;
  openExport(id: string): Promise<Readable | null>;
}

export interface BackupOptions {
  dataDir: string;
  /** The instance's blob store, and whether its blobs stay there (listed, not copied). */
  blobs: BackupBlobSource;
  leaveBlobsInStore?: boolean;
  /**
   * Where the site databases' replicas are (a folder holds one sub-folder per site), and whether a
   * folder's files go into the archive; unset: the instance does not replicate.
   */
  replicas?: { folder: string; carry: boolean } | { objectStore: ObjectStoreRecord };
  /** The master key file (default <data dir>/master.key). */
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
  /** Where the replicas were, and how many of their files the archive carries. */
  replicas: ReplicasRecord | null;
  replicaFiles: number;
  /** When each archived site database's snapshot was finished, by site id. */
  databaseSnapshots: Record<string, string>;
  /** How the SQLite copies went: restarts caused by concurrent writes. */
  snapshots: { meta: SnapshotReport; siteDatabases: number; restarts: number };
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
  const store = options.blobs;
  const keyFile = path.resolve(options.masterKeyFile ?? path.join(dataDir, 'master.key'));

  if (!fs.existsSync(dataDir))
    throw new BackupError(
      'not_a_data_dir',
      `there is no data dir at ${dataDir}: set BERTH_DATA_DIR to the server's data dir`,
    );
  if (!options.copyMetadata && !fs.existsSync(path.join(dataDir, META_NAME))) {
    throw new BackupError(
      'not_a_data_dir',
      `${dataDir} holds no Berth data (no ${META_NAME}): set BERTH_DATA_DIR to the server's data dir`,
    );
  }
  if (isInside(file, dataDir)) {
    throw new BackupError(
      'backup_inside_data_dir',
      `the backup would be written inside the data dir ${dataDir}, and lost with it: write it somewhere else`,
    );
  }
  let outDirStat: fs.Stats;
  try {
    outDirStat = await fsp.stat(outDir);
  } catch {
    throw new BackupError('no_such_folder', `the folder ${outDir} does not exist: create it first`);
  }
  if (!outDirStat.isDirectory()) throw new BackupError('no_such_folder', `${outDir} is not a folder`);
  if (fs.existsSync(file) && !(await fsp.stat(file)).isFile())
    throw new BackupError('not_a_file', `${file} exists and is not a file`);

  let masterKey: Buffer;
  try {
    masterKey = await fsp.readFile(keyFile);
  } catch {
    throw new BackupError(
      'no_master_key',
      `${keyFile} cannot be read: a data dir without its master key cannot be backed up whole`,
    );
  }
  if (masterKey.length !== MASTER_KEY_BYTES)
    throw new BackupError('no_master_key', `${keyFile} is not a ${MASTER_KEY_BYTES}-byte key`);
  const wrapped =
    options.masterKey.mode === 'wrapped' ? await wrapMasterKey(masterKey, options.masterKey.passphrase) : null;

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
      metaReport = options.copyMetadata
        ? await options.copyMetadata(metaCopy)
        : await snapshotDatabase(path.join(dataDir, META_NAME), metaCopy, options.snapshot);
    } catch (err) {
      throw new BackupError(
        'snapshot_failed',
        `the metadata (${options.copyMetadata ? 'on PostgreSQL' : path.join(dataDir, META_NAME)}) could not be copied: ${(err as Error).message}`,
      );
    }
    const meta = openSnapshot(metaCopy);
    let migrations: string[];
    let databases: Array<{ id: string; site_id: string; status: string }>;
    let exportsDone: Array<{ id: string; bytes: number }>;
    let blobs: Array<{ sha: string; bytes: number }>;
    const contents: BackupContents = { sites: 0, fileVersions: 0, blobs: 0, siteDatabases: 0, exports: 0 };
    const deletedDuringBackup: string[] = [];
    const siteDbs: string[] = [];
    const databaseSnapshots: Record<string, string> = {};
    let restarts = metaReport.restarts;
    try {
      meta.check();
      migrations = meta.all<{ name: string }>('SELECT name FROM knex_migrations ORDER BY id').map((r) => r.name);
      databases = meta.all('SELECT id, site_id, status FROM databases ORDER BY site_id');
      exportsDone = meta.all("SELECT id, bytes FROM database_exports WHERE status = 'COMPLETE' ORDER BY id");
      blobs = meta.all<{ sha: string; bytes: number }>(
        'SELECT blob_sha256 AS sha, MAX(bytes) AS bytes FROM file_versions GROUP BY blob_sha256 ORDER BY sha',
      );
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
            throw new BackupError(
              'snapshot_failed',
              `the database of site ${database.site_id} could not be copied: ${(err as Error).message}`,
            );
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
          throw new BackupError(
            'snapshot_failed',
            `the database of site ${database.site_id}: ${(err as Error).message}`,
          );
        } finally {
          siteDb.close();
        }
        siteDbs.push(database.site_id);
        databaseSnapshots[database.site_id] = new Date().toISOString();
      }

      // 3. Finished exports whose file is gone cannot be offered after a restore.
      const present: typeof exportsDone = [];
      for (const done of exportsDone) {
        const body = await store.openExport(done.id);
        if (body) {
          body.destroy();
          present.push(done);
        } else {
          meta.run("UPDATE database_exports SET status = 'ERROR', error = ? WHERE id = ?", [
            'the export file was missing when the backup was taken; create a new one',
            done.id,
          ]);
        }
      }
      exportsDone = present;
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
    const header: BackupHeader = {
      format: FORMAT,
      formatVersion: FORMAT_VERSION,
      berthVersion: options.berthVersion,
      createdAt,
      masterKey: options.masterKey.mode,
    };
    files.push(await tar.addBuffer(HEADER_NAME, Buffer.from(`${JSON.stringify(header, null, 2)}\n`)));

    const addFile = async (member: string, source: string): Promise<ManifestFile> => {
      const handle = await fsp.open(source, 'r');
      try {
        const { size } = await handle.stat();
        return await tar.add(member, size, fileChunks(handle));
      } finally {
        await handle.close();
      }
    };
    files.push(await addFile(META_NAME, metaCopy));
    for (const siteId of siteDbs)
      files.push(await addFile(siteDbMember(siteId), path.join(work, siteDbMember(siteId))));
    const replicas = options.replicas;
    let replicaFiles = 0;
    if (replicas && 'folder' in replicas && replicas.carry) {
      for (const siteId of siteDbs) {
        const carried = await addReplicaFiles(tar, path.resolve(replicas.folder), siteId);
        replicaFiles += carried.length;
        files.push(...carried);
      }
    }
    const replicasRecord: ReplicasRecord | null = !replicas
      ? null
      : 'folder' in replicas
        ? { folder: path.resolve(replicas.folder), carried: replicas.carry }
        : { objectStore: replicas.objectStore };
    for (const { id, bytes } of exportsDone) {
      const body = await store.openExport(id);
      if (!body)
        throw new BackupError('export_missing', `export ${id} was removed from ${store.location} while the backup ran`);
      files.push(await tar.add(exportMember(id), bytes, body));
    }
    const missing = (sha256: string) =>
      new BackupError(
        'blob_missing',
        `blob ${sha256}, which stored file versions reference, is missing from ${store.location}: the store is damaged`,
      );
    if (options.leaveBlobsInStore) {
      for (const { sha } of blobs) if (!(await store.has(sha))) throw missing(sha);
      files.push(await tar.addBuffer(STORE_BLOBS_NAME, Buffer.from(blobs.map(({ sha }) => `${sha}\n`).join(''))));
    } else {
      for (const { sha, bytes } of blobs) {
        let written: ManifestFile;
        try {
          written = await tar.add(blobMember(sha), bytes, await store.stream(sha));
        } catch (err) {
          if (errnoCode(err) !== 'ENOENT') throw err;
          throw missing(sha);
        }
        if (written.sha256 !== sha) {
          throw new BackupError(
            'blob_damaged',
            `blob ${sha} in ${store.location} no longer holds the bytes it is named after: the store is damaged`,
          );
        }
        files.push(written);
      }
    }
    if (wrapped)
      files.push(await tar.addBuffer(WRAPPED_KEY_NAME, Buffer.from(`${JSON.stringify(wrapped, null, 2)}\n`)));

    const manifest: Manifest = {
      ...header,
      schema: { migrations, latest: migrations.at(-1) ?? null },
      masterKeyFingerprint: keyFingerprint(masterKey),
      contents,
      files,
      ...(options.leaveBlobsInStore ? { blobsInStore: store.location } : {}),
      ...(replicasRecord ? { replicas: replicasRecord } : {}),
      databaseSnapshots,
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
      replicas: replicasRecord,
      replicaFiles,
      databaseSnapshots,
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
