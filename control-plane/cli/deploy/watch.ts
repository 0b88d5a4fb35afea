// Watches a project's deployed folders and root files and hands each settled batch of changed paths
// to `deploy`. Editors save in bursts (a temp file, a rename, a touch): changes are gathered until
// 200 ms pass without one, and a batch that arrives while a deploy runs waits for it.
import path from 'node:path';
import chokidar from 'chokidar';
import { isDeployedPath, isJunk } from './local-files.ts';

const SETTLE_MS = 200;

export interface WatchOptions {
  deploy(paths: Set<string>): Promise<void>;
  /** Called once the watcher sees the folder. */
  ready(): void;
}

/** Resolves after SIGINT or SIGTERM, once the deploy in progress, if any, has finished. */
export async function watchFolder(dir: string, options: WatchOptions): Promise<void> {
  const root = path.resolve(dir);
  const relative = (file: string) => path.relative(root, file).split(path.sep).join('/');
  let fail: (err: unknown) => void = () => {};
  const stopped = new Promise<void>((resolve, reject) => {
    fail = reject;
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });

  const watcher = chokidar.watch(root, {
    ignoreInitial: true,
    ignored: (file: string) => {
      const rel = relative(file);
      if (rel === '') return false;
      return !isDeployedPath(rel) || isJunk(path.basename(file));
    },
  });
  watcher.on('error', fail);

  let pending = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const flush = () => {
    running = running
      .then(async () => {
        if (pending.size === 0) return;
        const batch = pending;
        pending = new Set();
        await options.deploy(batch);
      })
      .catch(fail);
  };
  watcher.on('all', (event, file) => {
    if (event === 'addDir') return; // its files arrive as events of their own
    pending.add(relative(file));
    clearTimeout(timer);
    timer = setTimeout(flush, SETTLE_MS);
  });

  try {
    const ready = new Promise<boolean>((resolve) => watcher.once('ready', () => resolve(true)));
    if (await Promise.race([ready, stopped.then(() => false)])) {
      options.ready();
      await stopped;
    }
  } finally {
    clearTimeout(timer);
    await watcher.close();
    await running;
  }
}
