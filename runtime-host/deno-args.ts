// The command line of a Deno worker, as a pure function so the sandbox's flags can be read and
// tested without spawning anything.
import { dbLinePath } from './protocol.ts';

export interface DenoArgsOptions {
  /**
   * The worker's channel: with the path next to it (dbLinePath), all it may touch, and only until
   * the shim has connected.
   */
  socketPath: string;
  /** V8 old-space cap in MiB. */
  heapMb: number;
  /**
   * host:port of the egress proxy: the only address the worker may connect to. Every fetch goes
   * through it (deno-shim/egress.ts), and it decides where the request may go (egress-policy.ts).
   */
  egressAddress: string;
}

/**
 * How every Deno process of Berth starts: local modules only, no config file, lock file or prompt.
 * What it may do comes after, granted flag by flag.
 */
export const DENO_RUN = ['run', '--no-config', '--no-prompt', '--no-remote', '--no-npm', '--no-lock'];

/**
 * A worker's young generation: V8's default grows it to 16 MiB a half, which a busy function fills
 * and keeps. At 4 MiB a hello-world worker under load stayed at 73 MiB resident from 5 s to 40 s,
 * against 108 MiB growing to 126 MiB, for no measurable CPU per request.
 */
export const SEMI_SPACE_MB = 4;

/**
 * The program comes on stdin (see entryProgram), so the arguments name no host path but the socket's
 * and the path where the worker listens for its line to its site's database (dbLinePath); the
 * shim gives up both before the function's module runs.
 */
export function denoArgs(options: DenoArgsOptions): string[] {
  const db = dbLinePath(options.socketPath);
  return [
    ...DENO_RUN,
    // Deno asks net permission for a unix socket too: the channel's, which the shim revokes once connected,
    // and the database line's, which it revokes once listening.
    `--allow-net=${options.egressAddress},unix:${options.socketPath},unix:${db}`,
    `--allow-read=${options.socketPath},${db}`,
    `--allow-write=${options.socketPath},${db}`,
    `--v8-flags=--max-old-space-size=${options.heapMb},--max-semi-space-size=${SEMI_SPACE_MB}`,
    '-',
  ];
}

/** The environment a Deno process starts with: nothing of the host's. */
export function denoEnv(denoDir: string): Record<string, string> {
  return { DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' };
}
