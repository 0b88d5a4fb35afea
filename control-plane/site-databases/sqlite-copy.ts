// A copy of a live site database (for the object store: cluster/copies.ts),
// made with VACUUM INTO (which only reads the database) on a connection of its own, on a thread of its own
// (sqlite-copy-thread.js) so that neither the event loop nor the database's writers wait for it.
import { Worker } from 'node:worker_threads';

const THREAD_URL = new URL('./sqlite-copy-thread.js', import.meta.url);

/** Writes the database at `file`, as it is at one moment, to `dest`, which must not exist. */
export function copySqlite(file: string, dest: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const worker = new Worker(THREAD_URL, { workerData: { file, dest, busyMs: 10_000 } });
    worker.once('message', (answer: { ok: true } | { ok: false; message: string }) => {
      if (answer.ok) resolve();
      else reject(new Error(answer.message));
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the copy thread exited with code ${code}`)));
  });
}
