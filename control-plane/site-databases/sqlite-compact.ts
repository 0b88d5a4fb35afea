// Compacting a site database: VACUUM, which its own Deno process cannot run (VACUUM attaches its
// temporary copy, and Deno refuses ATTACH to a process without every permission). It runs here, on a
// thread of its own (sqlite-compact-thread.js) so the event loop goes on, one database at a time
// (SQLite's temporary folder is one setting for the whole process), while the site's calls wait.
import { Worker } from 'node:worker_threads';
import type { Compaction } from './protocol.ts';

const THREAD_URL = new URL('./sqlite-compact-thread.js', import.meta.url);

let queue: Promise<unknown> = Promise.resolve();

/** Rewrites `file` without free space, its temporary copy in `tempDir`; says what that gave back. */
export function compactSqlite(file: string, tempDir: string): Promise<Compaction> {
  const run = queue.then(
    () =>
      new Promise<Compaction>((resolve, reject) => {
        const worker = new Worker(THREAD_URL, { workerData: { file, tempDir, busyMs: 10_000 } });
        worker.once('message', (answer: { ok: true; value: Compaction } | { ok: false; message: string }) => {
          if (answer.ok) resolve(answer.value);
          else reject(new Error(answer.message));
        });
        worker.once('error', reject);
        worker.once('exit', (code) => reject(new Error(`the compaction thread exited with code ${code}`)));
      }),
  );
  queue = run.catch(() => {});
  return run;
}
