// Runs the whole suite once per metadata backend: `make test` calls this. It starts a throwaway
// PostgreSQL cluster for the run (or uses the server BERTH_TEST_DATABASE_URL names, as its superuser),
// runs ava on SQLite and then on PostgreSQL (BERTH_TEST_BACKEND), and removes what it made.
//
//   node --import tsx test/run-suite.ts [--backends sqlite,postgres] [ava arguments…]
import { spawn } from 'node:child_process';
import path from 'node:path';
import { type Cluster, startCluster } from './helpers/postgres-cluster.ts';

const BACKENDS = ['sqlite', 'postgres'] as const;
type Backend = (typeof BACKENDS)[number];

function parseArgs(argv: string[]): { backends: Backend[]; avaArgs: string[] } {
  const at = argv.indexOf('--backends');
  if (at === -1) return { backends: [...BACKENDS], avaArgs: argv };
  const named = (argv[at + 1] ?? '').split(',').filter(Boolean);
  const unknown = named.filter((name) => !(BACKENDS as readonly string[]).includes(name));
  if (named.length === 0 || unknown.length > 0) throw new Error(`--backends takes a list of ${BACKENDS.join(', ')}`);
  return { backends: named as Backend[], avaArgs: [...argv.slice(0, at), ...argv.slice(at + 2)] };
}

function runAva(backend: Backend, adminUrl: string, avaArgs: string[]): Promise<number> {
  console.log(`\nThe suite on ${backend === 'sqlite' ? 'SQLite (the embedded default)' : 'PostgreSQL'}\n`);
  const ava = path.resolve(import.meta.dirname, '../node_modules/ava/entrypoints/cli.mjs');
  const child = spawn(process.execPath, [ava, ...avaArgs], {
    stdio: 'inherit',
    env: { ...process.env, BERTH_TEST_BACKEND: backend, BERTH_TEST_DATABASE_URL: adminUrl },
  });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

const { backends, avaArgs } = parseArgs(process.argv.slice(2));
const given = process.env.BERTH_TEST_DATABASE_URL;
// The SQLite pass needs a PostgreSQL server too: copy-metadata's tests move an instance into one.
let cluster: Cluster | undefined;
if (!given) {
  cluster = await startCluster();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      cluster?.stop();
      process.exit(1);
    });
  }
}
const adminUrl = given ?? cluster!.adminUrl;
let failed = false;
try {
  for (const backend of backends) {
    const code = await runAva(backend, adminUrl, avaArgs);
    if (code !== 0) failed = true;
  }
} finally {
  if (cluster) cluster.stop();
  else {
    const { dropTestDatabases } = await import('./helpers/postgres.ts');
    await dropTestDatabases();
  }
}
process.exitCode = failed ? 1 : 0;
