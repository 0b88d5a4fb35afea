// Runs the real `berth` command as a child process, as an operator would.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { objectStoreEnv } from './object-store.ts';
import { databaseEnv } from './postgres.ts';

const BIN = path.resolve(import.meta.dirname, '../../control-plane/cli/berth.js');

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** Everything written to stdout so far. */
  output(): string;
  /** Resolves with the exit code once the process ends. */
  exited: Promise<number | null>;
}

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface ServeOptions {
  /** Starts it in a group of its own, to be signalled whole as a terminal's Ctrl-C does. */
  processGroup?: boolean;
  /**
   * Starts it as the README does, with `make run` (in a group of its own): `child` is then make, and
   * the server its child. The install step is taken as done (`-o`), so a test never reinstalls.
   */
  viaMake?: boolean;
  /** Another `berth` command to run (another release's). */
  bin?: string;
}

/**
 * `env` with what the data dir it names needs on this pass's backends: its database
 * (test/helpers/postgres.ts) and its bucket (test/helpers/object-store.ts), unless `env` names its own
 * (an empty BERTH_DATABASE_URL or BERTH_OBJECT_STORE: metadata in the data dir, files in its blob dir).
 */
export async function withBackend(env: Record<string, string>): Promise<Record<string, string>> {
  if (!env.BERTH_DATA_DIR) return env;
  const database = env.BERTH_DATABASE_URL !== undefined ? {} : await databaseEnv(env.BERTH_DATA_DIR);
  const store =
    env.BERTH_OBJECT_STORE !== undefined || env.BERTH_BLOB_DIR ? {} : await objectStoreEnv(env.BERTH_DATA_DIR);
  return { ...database, ...store, ...env };
}

/** Starts `berth serve` and waits for its "listening" log line. */
export async function startServe(givenEnv: Record<string, string>, options: ServeOptions = {}): Promise<ServeProcess> {
  const env = await withBackend(givenEnv);
  const [command, args] = options.viaMake
    ? ['make', ['--no-print-directory', '-o', 'node_modules/.berth-installed', 'run']]
    : [process.execPath, [options.bin ?? BIN, 'serve']];
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, BERTH_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: (options.processGroup ?? false) || (options.viaMake ?? false),
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = () => {
      const line = stdout.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (line) {
        child.stdout!.off('data', onData);
        resolve((JSON.parse(line) as { url: string }).url);
      }
    };
    child.stdout!.on('data', onData);
    void exited.then((code) => reject(new Error(`berth serve exited with ${code}: ${stderr}`)));
  });
  return { child, url, output: () => stdout, exited };
}

/**
 * Runs `berth <args>` to its end; `input` is written to its stdin (a password for --password-stdin),
 * `bin` is another `berth` command to run (another release's).
 */
export async function runBerth(
  args: string[],
  env: Record<string, string>,
  input?: string,
  bin = BIN,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { ...process.env, ...(await withBackend(env)) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(input ?? '');
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

export { processesMentioning } from '../../storage/leftover-processes.ts';
