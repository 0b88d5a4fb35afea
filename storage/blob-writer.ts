// Writes small objects of the local driver on threads of their own (blob-writer-thread.js). Written
// through libuv's threadpool, an object takes eight trips (create, write, fsync, close, rename, and
// open, fsync, close of its folder), and under load each trip waits for a turn of a busy event loop.
// On a writer thread the whole sequence is one job: the event loop sends one message and gets one answer.
import { Worker } from 'node:worker_threads';

export interface BlobJob {
  data: Uint8Array;
  /** The temp file to write, on the final path's file system. */
  tmp: string;
  /** Where the object goes; its folder is made when new. */
  final: string;
  /** Leaves an object already at `final` as it is (its key names its bytes). */
  keepExisting: boolean;
}

interface Pending {
  resolve: () => void;
  reject: (err: Error) => void;
}

type Answer = { id: number; error?: { message: string; code?: string } };

const THREAD_URL = new URL('./blob-writer-thread.js', import.meta.url);

class WriterThread {
  readonly #worker: Worker;
  readonly pending = new Map<number, Pending>();

  constructor(onGone: () => void) {
    this.#worker = new Worker(THREAD_URL);
    // An idle writer does not keep the process alive; a request waiting for it does.
    this.#worker.unref();
    this.#worker.on('message', (answer: Answer) => {
      const waiting = this.pending.get(answer.id);
      if (!waiting) return;
      this.pending.delete(answer.id);
      if (answer.error) waiting.reject(Object.assign(new Error(answer.error.message), { code: answer.error.code }));
      else waiting.resolve();
    });
    const gone = (err: Error) => {
      onGone();
      for (const waiting of this.pending.values()) waiting.reject(err);
      this.pending.clear();
    };
    this.#worker.on('error', gone);
    this.#worker.on('exit', (code) => gone(new Error(`the blob writer thread exited with code ${code}`)));
  }

  send(id: number, job: BlobJob, waiting: Pending): void {
    this.pending.set(id, waiting);
    this.#worker.postMessage({ id, ...job });
  }

  async stop(): Promise<void> {
    await this.#worker.terminate();
  }
}

export class BlobWriter {
  readonly #threads: Array<WriterThread | undefined>;
  #lastId = 0;

  /** `threads` writes can run at once, as many fsyncs as the disk is asked to overlap. */
  constructor(threads: number) {
    this.#threads = new Array<WriterThread | undefined>(threads).fill(undefined);
  }

  /** Places the object; nothing of it is left behind on failure. */
  write(job: BlobJob): Promise<void> {
    const thread = this.#leastBusy();
    const id = ++this.#lastId;
    return new Promise((resolve, reject) => thread.send(id, job, { resolve, reject }));
  }

  #leastBusy(): WriterThread {
    let best = 0;
    for (let slot = 0; slot < this.#threads.length; slot++) {
      const thread = this.#threads[slot];
      // A slot whose thread was never started, or has died, gets a new one.
      if (!thread) {
        const started: WriterThread = new WriterThread(() => this.#forget(slot, started));
        this.#threads[slot] = started;
        return started;
      }
      if (thread.pending.size < this.#threads[best]!.pending.size) best = slot;
    }
    return this.#threads[best]!;
  }

  #forget(slot: number, thread: WriterThread): void {
    if (this.#threads[slot] === thread) this.#threads[slot] = undefined;
  }

  async close(): Promise<void> {
    const running = this.#threads.filter((thread) => thread !== undefined);
    this.#threads.fill(undefined);
    await Promise.all(running.map((thread) => thread.stop()));
  }
}
