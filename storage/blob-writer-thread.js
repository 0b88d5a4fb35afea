// @ts-check
// The thread behind blob-writer.ts. It writes one small blob durably as one job: the temp file
// created, written and fsynced, renamed into its shard folder, and the folder fsynced. Plain
// JavaScript: worker threads do not run through Berth's TypeScript loader.
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
 * Places the blob, unless an identical upload placed it meanwhile.
 * @param {{ data: Uint8Array, tmp: string, final: string, root: string }} job
 */
function place({ data, tmp, final, root }) {
  if (fs.existsSync(final)) return;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    for (let at = 0; at < data.length; ) at += fs.writeSync(fd, data, at);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  const dir = path.dirname(final);
  if (!fs.existsSync(dir)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    syncFolder(root);
  }
  fs.renameSync(tmp, final);
  syncFolder(dir);
}

parentPort?.on(
  'message',
  (/** @type {{ id: number, data: Uint8Array, tmp: string, final: string, root: string }} */ job) => {
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
