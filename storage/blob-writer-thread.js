// @ts-check
// The thread behind blob-writer.ts. It writes one small object durably as one job: its folder made
// (and synced into the folder above) when new, the temp file created, written and fsynced, renamed
// into place, and the folder fsynced. Plain JavaScript: worker threads do not run through Berth's
// TypeScript loader.
import fs from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';

/** @param {string} dir */
function syncFolder(dir) {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Makes a folder and syncs each new entry into the folder above it, so that after a crash what is
 * renamed into it is still found.
 * @param {string} dir
 */
function makeFolder(dir) {
  const created = fs.mkdirSync(dir, { recursive: true, mode: 0o700 }) ?? dir;
  for (let made = dir; ; made = path.dirname(made)) {
    syncFolder(path.dirname(made));
    if (made === created) break;
  }
}

/**
 * Places the object; with `keepExisting`, not if an identical write placed it meanwhile.
 * @param {{ data: Uint8Array, tmp: string, final: string, keepExisting: boolean }} job
 */
function place({ data, tmp, final, keepExisting }) {
  if (keepExisting && fs.existsSync(final)) return;
  const dir = path.dirname(final);
  if (!fs.existsSync(dir)) makeFolder(dir);
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    for (let at = 0; at < data.length; ) at += fs.writeSync(fd, data, at);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, final);
  syncFolder(dir);
}

parentPort?.on(
  'message',
  (/** @type {{ id: number, data: Uint8Array, tmp: string, final: string, keepExisting: boolean }} */ job) => {
    try {
      place(job);
      parentPort?.postMessage({ id: job.id });
    } catch (err) {
      // Whatever failed, the temp file goes; after the rename there is none left.
      fs.rmSync(job.tmp, { force: true });
      const { message, code } = /** @type {NodeJS.ErrnoException} */ (err);
      parentPort?.postMessage({ id: job.id, error: { message, code } });
    }
  },
);
