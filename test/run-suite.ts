// Runs the whole suite once per set of backends: `make test` calls this. It starts a throwaway
// PostgreSQL cluster for the run (or uses the server BERTH_TEST_DATABASE_URL names, as its superuser)
// and a throwaway S3-compatible server (Ceph's radosgw), runs ava on the embedded defaults (SQLite and
// the data dir) and then on the shared backends (PostgreSQL and the object store: BERTH_TEST_BACKEND),
// and removes what it made.
//
//   node --import tsx test/run-suite.ts [--backends sqlite,postgres] [ava arguments…]
import { spawn } from 'node:child_process';
import path from 'node:path';
import { type Cluster, startCluster } from './helpers/postgres-cluster.ts';
import { type ObjectStoreServer, startObjectStoreServer } from './helpers/object-store-server.ts';

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

function runAva(backend: Backend, adminUrl: string, store: ObjectStoreServer, avaArgs: string[]): Promise<number> {
  console.log(
    `\nThe suite on ${backend === 'sqlite' ? 'SQLite and the data dir (the embedded defaults)' : 'PostgreSQL and the object store'}\n`,
  );
  const ava = path.resolve(import.meta.dirname, '../node_modules/ava/entrypoints/cli.mjs');
  const child = spawn(process.execPath, [ava, ...avaArgs], {
    stdio: 'inherit',
    env: {
      ...process.env,
      BERTH_TEST_BACKEND: backend,
      BERTH_TEST_DATABASE_URL: adminUrl,
      BERTH_TEST_S3_ENDPOINT: store.endpoint,
      // Where the AWS SDK's default chain finds credentials, in the tests' clients and in Berth.
      AWS_ACCESS_KEY_ID: store.accessKeyId,
      AWS_SECRET_ACCESS_KEY: store.secretAccessKey,
      AWS_REGION: 'us-east-1',
    },
  });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

const { backends, avaArgs } = parseArgs(process.argv.slice(2));
const given = process.env.BERTH_TEST_DATABASE_URL;
// The SQLite pass needs both servers too: copy-metadata's and copy-blobs' tests move an instance into them.
let cluster: Cluster | undefined;
let store: ObjectStoreServer | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    cluster?.stop();
    void (store?.stop() ?? Promise.resolve()).finally(() => process.exit(1));
  });
}
if (!given) cluster = await startCluster();
store = await startObjectStoreServer();
const adminUrl = given ?? cluster!.adminUrl;
let failed = false;
try {
  for (const backend of backends) {
    const code = await runAva(backend, adminUrl, store, avaArgs);
    if (code !== 0) failed = true;
  }
} finally {
  await store.stop();
  if (cluster) cluster.stop();
  else {
    const { dropTestDatabases } = await import('./helpers/postgres.ts');
    await dropTestDatabases();
  }
}
process.exitCode = failed ? 1 : 0;
