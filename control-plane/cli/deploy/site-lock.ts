// The site's deno.lock saved into the project after a deploy that left the site live with the
// project's files: the lock the project sent, or the one the server's build wrote when it had none.
// Saved when it differs from the project's, so the next deploy, from this machine or another,
// resolves the same package versions. It is written beside the project's and renamed over it: an
// editor, a watcher or a crash sees the old lock or the new one, never half of one.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { type ApiClient, encodePath } from '../api-client.ts';
import { CliError } from '../cli-error.ts';
import { sha256File } from './digest.ts';
import type { RemoteFile } from './remote-files.ts';

const LOCK_FILE = 'deno.lock';

export interface SavedLock {
  /** The project's lock file, now the site's. */
  path: string;
  bytes: number;
  /** The site's version of deno.lock that was saved. */
  versionId: string;
}

export async function saveSiteLock(
  api: ApiClient,
  bucketId: string,
  root: string,
  remoteDigest: (file: RemoteFile) => Promise<string>,
): Promise<SavedLock | null> {
  const objects = `buckets/${bucketId}/objects`;
  const site = (await api.get<{ files: RemoteFile[] }>(objects, { path: LOCK_FILE })).files[0];
  if (!site) return null;
  const target = path.join(root, LOCK_FILE);
  const local = await sha256File(target).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (local === (await remoteDigest(site))) return null;

  const temp = path.join(root, `.${LOCK_FILE}.${crypto.randomBytes(6).toString('hex')}.tmp`);
  try {
    await api.download(`${objects}/${encodePath(LOCK_FILE)}`, fs.createWriteStream(temp, { flags: 'wx' }));
    const handle = await fsp.open(temp, 'r+');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    const { size } = await fsp.stat(temp);
    await fsp.rename(temp, target);
    return { path: target, bytes: size, versionId: site.currentVersionId };
  } catch (err) {
    await fsp.rm(temp, { force: true });
    if (err instanceof CliError) throw err;
    throw new CliError(`the site's ${LOCK_FILE} could not be saved into ${root}: ${(err as Error).message}`, {
      code: 'lock_not_saved',
    });
  }
}
