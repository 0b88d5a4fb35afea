// The data dir holds the master key, every site's files and databases and the instance's metadata:
// only the user running Berth may read it. Whatever the umask of the shell that started Berth, what
// it creates there is private (directories 0700, files 0600), including what SQLite (-wal, -shm) and
// Deno child processes create, since they inherit the process umask.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

const PRIVATE_UMASK = 0o077;
const GROUP_OTHER_BITS = 0o077;

/** Makes everything this process and its children create private, then creates the data dir. */
export function usePrivateDataDir(dataDir: string): void {
  process.umask(PRIVATE_UMASK);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
}

/**
 * Takes away the group and other permissions that an older Berth or a looser umask left on the data
 * dir and everything in it: directories become 0700, files keep only their owner's bits (0600 for
 * data). Symbolic links are neither followed nor changed. Returns how many entries were changed.
 */
export async function tightenDataDir(dataDir: string): Promise<number> {
  let changed = 0;
  const visit = async (entry: string): Promise<void> => {
    let stat: fs.Stats;
    try {
      stat = await fsp.lstat(entry);
    } catch (err) {
      // Gone since its directory was listed (an admin command closing its -wal file, say).
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    if (!stat.isDirectory() && !stat.isFile()) return;
    if ((stat.mode & GROUP_OTHER_BITS) !== 0) {
      await fsp.chmod(entry, stat.isDirectory() ? 0o700 : stat.mode & 0o700);
      changed++;
    }
    if (stat.isDirectory()) await Promise.all((await fsp.readdir(entry)).map((name) => visit(path.join(entry, name))));
  };
  await visit(dataDir);
  return changed;
}

/** What `berth serve` does when it opens the data dir; returns how many entries were tightened. */
export async function openPrivateDataDir(dataDir: string): Promise<number> {
  usePrivateDataDir(dataDir);
  return tightenDataDir(dataDir);
}
