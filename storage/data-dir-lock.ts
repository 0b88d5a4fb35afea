// One server per data dir. Two would each stop the other's workers and database processes at start,
// sweep each other's temp files and race for the same migration leases. The lock is SQLite's own file
// lock (a POSIX record lock, through better-sqlite3) on `server.lock`: held by a write transaction that
// stays open for the life of the server, refused at once to anyone else, and released by the kernel
// when the process ends however it ends, so a server killed outright never blocks the next start.
// The holder's pid goes in `server.pid` beside it, for the message the next one gives.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

const LOCK_FILE = 'server.lock';
const PID_FILE = 'server.pid';

/** Another live server holds the data dir; `pid` is what it wrote, when it could be read. */
export class DataDirInUse extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number | null,
  ) {
    super(`the data dir ${dataDir} is in use by another Berth server${pid ? ` (pid ${pid})` : ''}`);
  }
}

export interface DataDirLock {
  release(): void;
}

function holderPid(dataDir: string): number | null {
  try {
    const pid = Number.parseInt(fs.readFileSync(path.join(dataDir, PID_FILE), 'utf8'), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Takes the data dir for this process, or throws DataDirInUse. */
export function lockDataDir(dataDir: string): DataDirLock {
  const lock = new Database(path.join(dataDir, LOCK_FILE), { timeout: 0 });
  try {
    // RESERVED: one holder at a time, taken or refused without waiting, never written to.
    lock.exec('BEGIN IMMEDIATE');
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new DataDirInUse(dataDir, holderPid(dataDir));
    throw err;
  }
  const pidFile = path.join(dataDir, PID_FILE);
  const tmp = `${pidFile}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${process.pid}\n`, { mode: 0o600 });
  fs.renameSync(tmp, pidFile);
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      fs.rmSync(pidFile, { force: true });
      lock.exec('ROLLBACK');
      lock.close();
    },
  };
}
