// Processes a previous server left running. A server killed outright (SIGKILL, OOM killer) cannot stop
// its children: a database process in the middle of a long statement or an export, or a worker stuck
// in a loop, notices its closed channel only when it next reads it, and meanwhile holds its database's
// write lock, writes, or burns CPU. The next server on the same data dir (it holds the data dir's lock,
// so they are not another live server's) stops them before it starts its own or sweeps temp files.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Pids of this user's processes, other than this one, whose command line mentions `needle`. */
export function processesMentioning(needle: string): number[] {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return []; // No /proc (macOS): nothing to find.
  }
  const pids: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) pids.push(Number(entry));
    } catch {
      // The process ended while the list was read.
    }
  }
  return pids;
}

/** Ended, or a zombie waiting for a parent that is not us to reap it: it runs no more either way. */
export function ended(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/**
 * Kills every Deno process a previous server left that may write inside one of `places` (the data dir,
 * and the workers' socket folder when it lies elsewhere), as its command line says, and every process
 * whose command line names one of `files` (the replicator's configuration), and waits until none runs;
 * returns how many there were.
 */
export async function stopLeftovers(places: string[], files: string[] = [], timeoutMs = 5000): Promise<number> {
  const pids = [
    ...new Set([
      ...places.flatMap((place) => processesMentioning(`--allow-write=${path.resolve(place)}${path.sep}`)),
      ...files.flatMap((file) => processesMentioning(path.resolve(file))),
    ]),
  ];
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already, or not ours to stop.
    }
  }
  const deadline = Date.now() + timeoutMs;
  while (!pids.every(ended) && Date.now() < deadline) await sleep(10);
  return pids.length;
}
