// Tenant processes (function workers, site database processes) run below the server's CPU priority,
// so hosting and the API stay responsive while a tenant burns CPU.
import fs from 'node:fs';
import os from 'node:os';

/** How much lower than the server's a tenant process's priority is, as a nice increment. */
export const DEFAULT_NICE = 10;

/**
 * Lowers the CPU priority of every thread of `pid` (Linux applies nice per thread; threads made later
 * inherit it from their creator). Relative to the host's own, since only root may raise priority.
 */
export function lowerPriority(pid: number | undefined, nice: number): void {
  if (!pid || nice <= 0) return;
  const target = Math.min(19, os.getPriority() + nice);
  let threads = [pid];
  try {
    threads = fs.readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    // No /proc (macOS): the process's priority is all there is.
  }
  for (const id of threads) {
    try {
      os.setPriority(id, target);
    } catch {
      // The thread or process has already exited.
    }
  }
}
