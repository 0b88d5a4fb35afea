// What makes a write survive a crash beyond the file's own contents: a renamed or created entry is only
// durable once its directory is synced too.
import fsp from 'node:fs/promises';
import path from 'node:path';

/** Flushes a file or a directory (its entries: creations, renames, removals) to the disk. */
export async function syncPath(target: string): Promise<void> {
  const handle = await fsp.open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The errno code of a file-system error, e.g. 'ENOENT'. */
export const errnoCode = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | null)?.code;

/** Writes `file` whole or not at all: a temp file beside it, flushed, renamed over it, the folder flushed. */
export async function writeFileDurably(file: string, contents: string): Promise<void> {
  const tmp = `${file}.tmp`;
  await fsp.writeFile(tmp, contents, { mode: 0o600, flush: true });
  await fsp.rename(tmp, file);
  await syncPath(path.dirname(file));
}
