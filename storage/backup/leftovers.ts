// What a backup or a restore killed outright leaves: its work folder of database copies and its
// half-written archive or data dir, beside the file or folder it was making. Their names carry the
// pid of the process that made them, so the next backup or restore in the same place removes those
// of processes that no longer run, and never those of one still at work there.
import fs from 'node:fs';
import path from 'node:path';
import { ended } from '../leftover-processes.ts';

/** A name stem that marks what follows as this process's: `<stem><pid>-`. */
export const ownedPrefix = (stem: string): string => `${stem}${process.pid}-`;

/** Removes the entries of `folder` whose name is `<stem><pid>-…` for a pid that runs no more; returns their names. */
export async function sweepDeadLeftovers(folder: string, stems: string[]): Promise<string[]> {
  let names: string[];
  try {
    names = fs.readdirSync(folder);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const stem = stems.find((s) => name.startsWith(s));
    const pid = stem === undefined ? NaN : Number(/^(\d+)-/.exec(name.slice(stem.length))?.[1]);
    if (!Number.isSafeInteger(pid) || !ended(pid)) continue;
    await fs.promises.rm(path.join(folder, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}
