// Processes a previous server left running. A server killed outright (SIGKILL, OOM killer) cannot stop
// its children: a database process in the middle of a long statement, or a worker stuck in a loop,
// notices its closed channel only when it next reads it, and meanwhile holds its database's write lock
// or burns CPU. The next server on the same data dir stops them before it starts its own.
import fs from 'node:fs';

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

/** Kills the processes left by a previous server whose command line mentions `needle`; returns how many. */
export function killLeftovers(needle: string): number {
  let killed = 0;
  for (const pid of processesMentioning(needle)) {
    try {
      process.kill(pid, 'SIGKILL');
      killed++;
    } catch {
      // Gone already, or not ours to stop.
    }
  }
  return killed;
}
