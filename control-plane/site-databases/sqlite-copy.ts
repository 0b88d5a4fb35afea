// A copy of a site database as it is now, for a branch of it (local/branches.ts): VACUUM INTO, which
// its own Deno process cannot run (it attaches the new file, and Deno refuses ATTACH to a process
// without every permission). It runs here, on a thread of its own (sqlite-copy-thread.js) so the event
// loop goes on, reading the database in one transaction beside its process's calls, which go on too.
import { Worker } from 'node:worker_threads';

const THREAD_URL = new URL('./sqlite-copy-thread.js', import.meta.url);

/** Writes the database in `file` as it is now to the new file `into`. */
export function copySqlite(file: string, into: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const worker = new Worker(THREAD_URL, { workerData: { file, into, busyMs: 10_000 } });
    worker.once('message', (answer: { ok: true } | { ok: false; message: string }) => {
      if (answer.ok) resolve();
      else reject(new Error(answer.message));
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the copy thread exited with code ${code}`)));
  });
}
