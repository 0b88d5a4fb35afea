// The files of the site databases' replicas when they are kept in a folder: carried into an archive
// as they are at the moment each is read, and put back where the restored instance keeps its replicas.
// What the files mean is the replication engine's business; here they are only files that are written
// once and never changed, each dated by its modification time.
import crypto from 'node:crypto';
import type fs from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { type ManifestFile, REPLICA_PATH, REPLICAS_FOLDER, replicaMember } from './layout.ts';
import { type TarWriter, type WrittenMember, fileChunks } from './tar.ts';
import { errnoCode, syncPath } from '../durable.ts';

/** The files under `dir`, relative to it with forward slashes, sorted; a folder gone while it is walked has none. */
export async function filesUnder(dir: string, relative = ''): Promise<string[]> {
  let entries: fs.Dirent[];
  try {
    entries = await fsp.readdir(path.join(dir, relative), { withFileTypes: true });
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    throw err;
  }
  const files: string[] = [];
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const name = relative ? `${relative}/${entry.name}` : entry.name;
    if (entry.isDirectory()) files.push(...(await filesUnder(dir, name)));
    else if (entry.isFile()) files.push(name);
  }
  return files;
}

/**
 * The files of a site database's replica folder, each as it is when it is read. The replication engine
 * writes every file whole under a temporary name (`*.tmp`, left out here) and renames it, and never
 * rewrites one (new log segments and snapshots are new files), so a file listed is complete; one its
 * retention removed between the listing and the read is skipped. Each keeps its modification time in
 * the manifest: the engine dates what a file holds by it.
 */
export async function addReplicaFiles(tar: TarWriter, folder: string, siteId: string): Promise<ManifestFile[]> {
  const root = path.join(folder, siteId);
  const carried: ManifestFile[] = [];
  for (const relative of await filesUnder(root)) {
    const member = replicaMember(siteId, relative);
    // The engine names nothing otherwise; a stray file a restore would refuse stays out.
    if (relative.endsWith('.tmp') || !REPLICA_PATH.test(member)) continue;
    let handle: FileHandle;
    try {
      handle = await fsp.open(path.join(root, relative), 'r');
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') continue;
      throw err;
    }
    let written: WrittenMember;
    let mtime: Date;
    try {
      const stat = await handle.stat();
      mtime = stat.mtime;
      written = await tar.add(member, stat.size, fileChunks(handle));
    } finally {
      await handle.close();
    }
    carried.push({ ...written, mtime: mtime.toISOString() });
  }
  return carried;
}

/**
 * Carried replica files, unpacked (and synced) under `<work>/database-replicas`, get their modification
 * times back and move to `replicaDir` when the restored instance keeps its replicas elsewhere than in
 * its data dir; into a folder outside it, beside what that folder holds (addReplicaFolder), before the
 * data dir appears. Returns whether any were carried.
 */
export async function placeReplicaFiles(
  work: string,
  dataDir: string,
  replicaDir: string,
  files: ManifestFile[],
): Promise<boolean> {
  const carried = path.join(work, REPLICAS_FOLDER);
  const members = files.filter((f) => REPLICA_PATH.test(f.path));
  if (members.length === 0) return false;
  for (const member of members) {
    const mtime = new Date(member.mtime ?? Number.NaN);
    if (Number.isNaN(mtime.getTime())) continue;
    const file = path.join(work, member.path);
    await fsp.utimes(file, mtime, mtime);
    await syncPath(file);
  }
  const relative = path.relative(dataDir, replicaDir);
  if (relative === REPLICAS_FOLDER) return true;
  if (relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative)) {
    const inside = path.join(work, relative);
    await fsp.mkdir(path.dirname(inside), { recursive: true, mode: 0o700 });
    await fsp.rename(carried, inside);
    await syncPath(path.dirname(inside));
    await syncPath(work);
    return true;
  }
  await addReplicaFolder(carried, replicaDir);
  await fsp.rm(carried, { recursive: true, force: true });
  return true;
}

/**
 * Adds the files of the replica folder `from` that `to` lacks, each written whole (temp file, fsync,
 * rename) with its modification time; a file already there is the same one, since none is ever
 * rewritten. `from` may be a live replica folder: a file being written (`*.tmp`) is left, one removed
 * since the listing is skipped. Returns how many files were added.
 */
export async function addReplicaFolder(from: string, to: string): Promise<number> {
  const touched = new Set<string>();
  let added = 0;
  for (const file of await filesUnder(from)) {
    if (file.endsWith('.tmp')) continue;
    const target = path.join(to, file);
    if (
      await fsp.stat(target).then(
        () => true,
        () => false,
      )
    )
      continue;
    await fsp.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
    const tmp = `${target}.${crypto.randomBytes(6).toString('hex')}.tmp`;
    try {
      const source = path.join(from, file);
      const { mtime } = await fsp.stat(source);
      await fsp.copyFile(source, tmp);
      await fsp.chmod(tmp, 0o600);
      await fsp.utimes(tmp, mtime, mtime);
      await syncPath(tmp);
      await fsp.rename(tmp, target);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') continue;
      throw err;
    } finally {
      await fsp.rm(tmp, { force: true });
    }
    added++;
    touched.add(path.dirname(target));
  }
  for (const folder of touched) await syncPath(folder);
  return added;
}
