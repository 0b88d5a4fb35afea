// `berth admin restore`: a data dir rebuilt from a backup archive, all or nothing.
//
// The archive is unpacked into a new folder beside the target (so the final rename stays on one file
// system), every member is hashed on the way and checked against the manifest, the master key is
// unwrapped or taken from the operator's file and checked against the manifest's fingerprint, every
// file and folder is fsynced, and only then does the folder take the target's name. Whatever fails,
// the folder is removed: the target is either untouched or whole. Folders are 0700, files 0600.
// (An existing empty target on a file system of its own, or under a parent this user may not write,
// is staged inside itself and filled entry by entry at the end, the metadata last.) Replica files the
// archive carries go to the restored instance's replica folder; bringing its databases forward from
// them is the control plane's step, after this one.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ownedPrefix, sweepDeadLeftovers } from './leftovers.ts';
import { KeyWrapError, MASTER_KEY_BYTES, type WrappedKey, keyFingerprint, unwrapMasterKey } from './key-wrap.ts';
import {
  BLOB_PATH,
  BackupError,
  type BackupHeader,
  FORMAT,
  FORMAT_VERSION,
  HEADER_NAME,
  MANIFEST_NAME,
  MANIFEST_SUM_NAME,
  META_NAME,
  REPLICAS_FOLDER,
  SITE_DB_PATH,
  STORE_BLOBS_NAME,
  type Manifest,
  type ManifestFile,
  type ReplicasRecord,
  WRAPPED_KEY_NAME,
  isDataMember,
} from './layout.ts';
import { placeReplicaFiles } from './replica-files.ts';
import { TarFormatError, readTar } from './tar.ts';
import { syncPath } from '../durable.ts';

export interface RestoreOptions {
  file: string;
  /** Must not exist, or be an empty folder. */
  dataDir: string;
  /** The metadata migrations this Berth knows: a backup of a newer schema is refused. */
  knownMigrations: string[];
  /** The key file (a backup without its key, or instead of the passphrase), or the passphrase of a wrapped key. */
  masterKey: { file: string } | { passphrase: string } | null;
  /**
   * The object store the restored instance will use: the archive's blobs and exports go into it
   * rather than into the data dir, and blobs the backup left in a store are checked present in it.
   */
  objectStore?: RestoreObjectStore;
  /** Where carried replica files go (default <data dir>/database-replicas). */
  replicaDir?: string;
}

/** What a restore needs of the restored instance's object store. */
export interface RestoreObjectStore {
  readonly location: string;
  put(source: Readable, maxBytes: number): Promise<{ sha256: string; unpin(): void }>;
  has(sha256: string): Promise<boolean>;
  putExport(id: string, file: string): Promise<number>;
}

export interface RestoreReport {
  dataDir: string;
  file: string;
  createdAt: string;
  berthVersion: string;
  schema: Manifest['schema'];
  masterKey: Manifest['masterKey'];
  contents: Manifest['contents'];
  /** Where the backed-up instance's replicas were; null when it did not replicate (or predates replicas). */
  replicas: ReplicasRecord | null;
  /** Where the archive's replica files were put; null when it carried none. */
  replicaDir: string | null;
  /** Each restored site database, with when its archived snapshot was finished. */
  siteDatabases: Array<{ siteId: string; snapshotAt: string }>;
}

/** The archive's own records are small; a manifest of millions of blobs is not. */
const RECORD_LIMITS: Record<string, number> = {
  [HEADER_NAME]: 64 * 1024,
  [WRAPPED_KEY_NAME]: 64 * 1024,
  [MANIFEST_SUM_NAME]: 1024,
  [MANIFEST_NAME]: 1024 * 1024 * 1024,
};

const damaged = (why: string) =>
  new BackupError('backup_damaged', `the backup is damaged or altered (${why}); nothing was restored`);

function parseJson<T>(bytes: Buffer, what: string): T {
  try {
    return JSON.parse(bytes.toString('utf8')) as T;
  } catch {
    throw damaged(`${what} is not valid JSON`);
  }
}

/** Checks that the target may receive a restore; returns whether it exists (as an empty folder). */
async function checkTarget(dataDir: string): Promise<boolean> {
  let stat: fs.Stats;
  try {
    stat = await fsp.stat(dataDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  if (!stat.isDirectory())
    throw new BackupError(
      'target_not_empty',
      `${dataDir} exists and is not a folder: restore into a new, empty folder`,
    );
  if ((await fsp.readdir(dataDir)).length > 0) {
    throw new BackupError(
      'target_not_empty',
      `${dataDir} is not empty: restore into a new, empty folder (nothing was changed)`,
    );
  }
  return true;
}

async function writable(folder: string): Promise<boolean> {
  try {
    await fsp.access(folder, fs.constants.W_OK | fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function readKeyFile(file: string): Promise<Buffer> {
  let key: Buffer;
  try {
    key = await fsp.readFile(file);
  } catch (err) {
    throw new BackupError(
      'master_key',
      `the master key file ${path.resolve(file)} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  if (key.length !== MASTER_KEY_BYTES)
    throw new BackupError(
      'master_key',
      `${path.resolve(file)} is not a master key (Berth's master.key holds ${MASTER_KEY_BYTES} bytes)`,
    );
  return key;
}

export async function restoreBackup(options: RestoreOptions): Promise<RestoreReport> {
  const file = path.resolve(options.file);
  const dataDir = path.resolve(options.dataDir);
  const keyFromFile =
    options.masterKey && 'file' in options.masterKey ? await readKeyFile(options.masterKey.file) : null;
  const passphrase = options.masterKey && 'passphrase' in options.masterKey ? options.masterKey.passphrase : null;

  let archive: FileHandle;
  try {
    archive = await fsp.open(file, 'r');
  } catch (err) {
    throw new BackupError(
      'no_backup',
      `the backup ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  const state: { work: string | null; current: FileHandle | null; done: boolean } = {
    work: null,
    current: null,
    done: false,
  };
  try {
    // A restore killed outright left its staging folder beside the target or inside it.
    const parent = path.dirname(dataDir);
    const stems = { beside: `.${path.basename(dataDir)}.restore-`, inside: '.berth-restore-' };
    await sweepDeadLeftovers(parent, [stems.beside]);
    await sweepDeadLeftovers(dataDir, [stems.inside]);
    const targetExists = await checkTarget(dataDir);
    if (!targetExists) await fsp.mkdir(parent, { recursive: true, mode: 0o700 });
    // Staged beside the target, so one rename publishes it. An existing empty target that is a mount
    // point of its own (a rename cannot cross file systems), or whose parent this user may not write
    // (/var/lib), is staged inside instead, and its entries are moved into place at the end.
    const inside =
      targetExists && ((await fsp.stat(dataDir)).dev !== (await fsp.stat(parent)).dev || !(await writable(parent)));
    const work = await fsp.mkdtemp(
      inside ? path.join(dataDir, ownedPrefix(stems.inside)) : path.join(parent, ownedPrefix(stems.beside)),
    );
    state.work = work;
    await fsp.chmod(work, 0o700);

    const { header, records, seen, folders } = await unpack(
      archive,
      file,
      work,
      state,
      keyFromFile !== null,
      passphrase !== null,
    );

    // Every member against the manifest, and the manifest against its own sum.
    const manifestBytes = records.get(MANIFEST_NAME);
    const manifestSum = records.get(MANIFEST_SUM_NAME);
    if (!manifestBytes || !manifestSum) throw damaged('its manifest is missing; was the archive cut short?');
    if (crypto.createHash('sha256').update(manifestBytes).digest('hex') !== manifestSum.toString('utf8').trim())
      throw damaged('the manifest fails its checksum');
    const manifest = parseJson<Manifest>(manifestBytes, MANIFEST_NAME);
    if (
      manifest.format !== FORMAT ||
      manifest.masterKey !== header.masterKey ||
      manifest.createdAt !== header.createdAt ||
      !Array.isArray(manifest.files)
    ) {
      throw damaged('the manifest does not match the archive header');
    }
    const expected = new Map(manifest.files.map((f) => [f.path, f]));
    if (expected.size !== manifest.files.length || expected.size !== seen.length)
      throw damaged('the manifest and the archive list different files');
    for (const member of seen) {
      const listed = expected.get(member.path);
      if (!listed) throw damaged(`${member.path} is not in the manifest`);
      if (listed.size !== member.size || listed.sha256 !== member.sha256)
        throw damaged(`${member.path} fails its checksum`);
      const blob = BLOB_PATH.exec(member.path);
      if (blob && blob[2] !== member.sha256) throw damaged(`${member.path} does not hold the bytes it is named after`);
    }

    const unknown = manifest.schema.migrations.filter((name) => !options.knownMigrations.includes(name));
    if (unknown.length > 0) {
      throw new BackupError(
        'backup_too_new',
        `this backup was taken by Berth ${manifest.berthVersion}, whose metadata has schema step ${unknown.at(-1)} unknown to this Berth: restore it with that version or a newer one`,
      );
    }

    // The master key: from the operator's file, or unwrapped; either way the one the data was sealed with.
    let key: Buffer;
    if (keyFromFile) {
      key = keyFromFile;
    } else {
      const wrapped = records.get(WRAPPED_KEY_NAME);
      if (!wrapped) throw damaged(`${WRAPPED_KEY_NAME} is missing`);
      try {
        key = await unwrapMasterKey(parseJson<WrappedKey>(wrapped, WRAPPED_KEY_NAME), passphrase!);
      } catch (err) {
        if (err instanceof KeyWrapError) throw new BackupError('master_key', `${err.message}; nothing was restored`);
        throw err;
      }
    }
    if (keyFingerprint(key) !== manifest.masterKeyFingerprint) {
      const which =
        options.masterKey && 'file' in options.masterKey ? path.resolve(options.masterKey.file) : 'the unwrapped key';
      throw new BackupError(
        'master_key',
        `${which} is not the master key of the backed-up instance; nothing was restored`,
      );
    }
    for (const listed of manifest.files) {
      if (listed.mtime !== undefined && Number.isNaN(Date.parse(listed.mtime)))
        throw damaged(`${listed.path} has no valid modification time in the manifest`);
    }
    await placeBlobs(work, manifest, options.objectStore);

    const keyFile = path.join(work, 'master.key');
    await fsp.writeFile(keyFile, key, { mode: 0o600, flag: 'wx' });
    await syncPath(keyFile);

    // Folders deepest first, then the rename that makes it all appear at once.
    for (const folder of [...folders].sort((a, b) => b.length - a.length))
      if (fs.existsSync(folder)) await syncPath(folder);
    const replicaDir = path.resolve(options.replicaDir ?? path.join(dataDir, REPLICAS_FOLDER));
    const carried = await placeReplicaFiles(work, dataDir, replicaDir, manifest.files);
    if (inside) {
      // The metadata last: until it is in place the folder is no data dir a server would open.
      const entries = (await fsp.readdir(work)).sort((a, b) => Number(a === META_NAME) - Number(b === META_NAME));
      for (const entry of entries) await fsp.rename(path.join(work, entry), path.join(dataDir, entry));
      await fsp.rmdir(work);
      state.done = true;
      await fsp.chmod(dataDir, 0o700).catch(() => {});
      await syncPath(dataDir);
    } else {
      // rename(2) replaces an empty folder in one step.
      await fsp.rename(work, dataDir);
      state.done = true;
      await syncPath(parent);
    }

    return {
      dataDir,
      file,
      createdAt: manifest.createdAt,
      berthVersion: manifest.berthVersion,
      schema: manifest.schema,
      masterKey: manifest.masterKey,
      contents: manifest.contents,
      replicas: manifest.replicas ?? null,
      replicaDir: carried ? replicaDir : null,
      siteDatabases: manifest.files.flatMap((f) => {
        const siteId = SITE_DB_PATH.exec(f.path)?.[1];
        return siteId ? [{ siteId, snapshotAt: manifest.databaseSnapshots?.[siteId] ?? manifest.createdAt }] : [];
      }),
    };
  } finally {
    await state.current?.close().catch(() => {});
    await archive.close().catch(() => {});
    if (state.work && !state.done) await fsp.rm(state.work, { recursive: true, force: true });
  }
}

/**
 * Blobs the backup left in an object store must all be in the one the restored instance uses; blobs
 * and exports in the archive go into that store when there is one (each blob checked by its digest),
 * and out of the data dir.
 */
async function placeBlobs(work: string, manifest: Manifest, store: RestoreObjectStore | undefined): Promise<void> {
  const listed = path.join(work, STORE_BLOBS_NAME);
  if (manifest.blobsInStore !== undefined) {
    if (!store) {
      throw new BackupError(
        'object_store_required',
        `this backup left its blobs in ${manifest.blobsInStore}: set BERTH_OBJECT_STORE (and BERTH_S3_*) to that store to restore it`,
      );
    }
    const digests = (await fsp.readFile(listed, 'utf8')).split('\n').filter(Boolean);
    const missing: string[] = [];
    for (const sha256 of digests) if (!(await store.has(sha256))) missing.push(sha256);
    if (missing.length > 0) {
      throw new BackupError(
        'blob_missing',
        `${missing.length} of the ${digests.length} blobs this backup left in its store are not in ${store.location} (the first: ${missing[0]}); nothing was restored`,
      );
    }
    await fsp.rm(listed);
  }
  if (!store) return;
  const blobs = path.join(work, 'blobs');
  for (const shard of await fsp.readdir(blobs).catch(() => [])) {
    for (const name of await fsp.readdir(path.join(blobs, shard))) {
      const stored = await store.put(fs.createReadStream(path.join(blobs, shard, name)), Number.MAX_SAFE_INTEGER);
      stored.unpin();
      if (stored.sha256 !== name) throw damaged(`blobs/${shard}/${name} does not hold the bytes it is named after`);
    }
  }
  await fsp.rm(blobs, { recursive: true, force: true });
  const exports = path.join(work, 'exports');
  for (const name of await fsp.readdir(exports).catch(() => []))
    await store.putExport(name.replace(/\.sql$/, ''), path.join(exports, name));
  await fsp.rm(exports, { recursive: true, force: true });
}

interface Unpacked {
  header: BackupHeader;
  /** The archive's own records (header, wrapped key, manifest and its sum), in memory. */
  records: Map<string, Buffer>;
  /** Every member before the manifest, with its size and SHA-256 as read. */
  seen: ManifestFile[];
  /** Every folder made, for the fsyncs. */
  folders: Set<string>;
}

/** Reads the whole archive: data members into `work`, records into memory. */
async function unpack(
  archive: FileHandle,
  file: string,
  work: string,
  state: { current: FileHandle | null },
  keyFile: boolean,
  passphrase: boolean,
): Promise<Unpacked> {
  const records = new Map<string, Buffer>();
  const seen: ManifestFile[] = [];
  const names = new Set<string>();
  const folders = new Set<string>([work]);
  let header: BackupHeader | null = null;
  let currentName = '';
  let recordChunks: Buffer[] | null = null;
  try {
    await readTar(
      archive,
      async (name, size) => {
        if (names.has(name)) throw damaged(`${name} appears twice`);
        if (names.size === 0 && name !== HEADER_NAME)
          throw new BackupError(
            'not_a_backup',
            `${file} is not a Berth backup (it does not start with ${HEADER_NAME})`,
          );
        if (names.has(MANIFEST_NAME) && name !== MANIFEST_SUM_NAME) throw damaged(`${name} follows the manifest`);
        names.add(name);
        currentName = name;
        const limit = RECORD_LIMITS[name];
        if (limit !== undefined) {
          if (size > limit) throw damaged(`${name} is too large`);
          const chunks: Buffer[] = [];
          recordChunks = chunks;
          return { write: (chunk: Buffer) => void chunks.push(chunk) };
        }
        if (!isDataMember(name)) throw damaged(`it holds an unexpected member "${name}"`);
        recordChunks = null;
        const target = path.join(work, name);
        const folder = path.dirname(target);
        if (!folders.has(folder)) {
          await fsp.mkdir(folder, { recursive: true, mode: 0o700 });
          for (let f = folder; f !== work && !folders.has(f); f = path.dirname(f)) folders.add(f);
        }
        const handle = await fsp.open(target, 'wx', 0o600);
        state.current = handle;
        return { write: async (chunk: Buffer) => void (await handle.write(chunk)) };
      },
      async (member) => {
        if (recordChunks) {
          records.set(member.path, Buffer.concat(recordChunks));
          recordChunks = null;
        } else if (state.current) {
          const handle = state.current;
          state.current = null;
          await handle.sync();
          await handle.close();
        }
        if (member.path === HEADER_NAME) {
          header = parseJson<BackupHeader>(records.get(HEADER_NAME)!, HEADER_NAME);
          checkHeader(header, file, keyFile, passphrase);
        }
        if (member.path !== MANIFEST_NAME && member.path !== MANIFEST_SUM_NAME) seen.push(member);
        currentName = '';
      },
    );
  } catch (err) {
    if (err instanceof TarFormatError) {
      throw names.size === 0
        ? new BackupError('not_a_backup', `${file} is not a Berth backup (${err.message})`)
        : damaged(currentName ? `in ${currentName}: ${err.message}` : err.message);
    }
    throw err;
  }
  // Set by the callback above, which the compiler cannot follow.
  const found = header as BackupHeader | null;
  if (!found) throw new BackupError('not_a_backup', `${file} is not a Berth backup (it is empty)`);
  return { header: found, records, seen, folders };
}

/** Refuses at the first member what cannot work: an unknown format, or no way to get the master key. */
function checkHeader(header: BackupHeader, file: string, keyFile: boolean, passphrase: boolean): void {
  if (header.format !== FORMAT) throw new BackupError('not_a_backup', `${file} is not a Berth backup`);
  if (header.formatVersion !== FORMAT_VERSION) {
    throw new BackupError(
      'backup_too_new',
      `${file} has backup format ${header.formatVersion}; this Berth reads format ${FORMAT_VERSION}: restore it with Berth ${header.berthVersion} or newer`,
    );
  }
  if (header.masterKey === 'omitted' && !keyFile) {
    throw new BackupError(
      'master_key_required',
      passphrase
        ? "this backup was taken without the master key, so there is nothing to unwrap: give the instance's master.key with --master-key <file>"
        : "this backup was taken without the master key: give the instance's master.key with --master-key <file>",
    );
  }
  if (header.masterKey === 'wrapped' && !keyFile && !passphrase) {
    throw new BackupError(
      'master_key_required',
      'the master key in this backup is wrapped with a passphrase: pipe it in with --master-key-passphrase-stdin (or give the key file with --master-key <file>)',
    );
  }
  if (header.masterKey !== 'omitted' && header.masterKey !== 'wrapped')
    throw damaged('its header names no master key mode');
}
