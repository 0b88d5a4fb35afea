// The command line of a Deno worker, as a pure function so the sandbox's flags can be read and
// tested without spawning anything.

/**
 * Addresses a function may never fetch: this machine, private networks, link-local and carrier-grade
 * NAT ranges. Deno checks deny rules against resolved addresses too, so a public name that resolves
 * here is refused as well. Deno takes CIDR only for IPv4; IPv6 is covered by its loopback and
 * unspecified addresses (see docs/runtime.md for what that leaves open).
 */
export const DENIED_NETWORKS = [
  '0.0.0.0/8',
  '127.0.0.0/8',
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '169.254.0.0/16',
  '100.64.0.0/10',
  '[::1]',
  '[::]',
  'localhost',
];

/**
 * This machine's own interface addresses, in Deno's syntax. Denying them too stops a function from
 * reaching the control plane through a public address, or listening on one.
 */
export function localAddresses(interfaces: Record<string, Array<{ address: string; family: string | number }> | undefined>): string[] {
  return Object.values(interfaces)
    .flatMap((list) => list ?? [])
    .map(({ address, family }) => (family === 'IPv6' || family === 6 ? `[${address.split('%')[0]}]` : address));
}

export interface DenoArgsOptions {
  /** The worker's channel: the only path it may touch, and only until the shim has connected. */
  socketPath: string;
  /** V8 old-space cap in MiB. */
  heapMb: number;
  /** Addresses denied on top of DENIED_NETWORKS, e.g. this machine's interfaces. */
  extraDenied?: string[];
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

/** The program comes on stdin (see entryProgram), so the arguments name no host path but the socket's. */
export function denoArgs(options: DenoArgsOptions): string[] {
  return [
    ...DENO_RUN,
    '--allow-net',
    `--deny-net=${[...new Set([...DENIED_NETWORKS, ...(options.extraDenied ?? [])])].join(',')}`,
    `--allow-read=${options.socketPath}`,
    `--allow-write=${options.socketPath}`,
    `--v8-flags=--max-old-space-size=${options.heapMb},--max-semi-space-size=${SEMI_SPACE_MB}`,
    '-',
  ];
}

/** The environment a Deno process starts with: nothing of the host's. */
export function denoEnv(denoDir: string): Record<string, string> {
  return { DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' };
}
