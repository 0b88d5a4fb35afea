// `make bench`, the cluster part: what one hosted request costs the services the nodes of an instance
// share, so that PostgreSQL, the object store and the network between nodes can be sized from figures.
// Two nodes on one PostgreSQL and one object store (Ceph's radosgw), as docs/cluster.md sets them up:
// node A holds the site's database, node B is web-only and forwards its database calls to A. For each
// kind of request, sent N times through one node, the nodes' own counters (berth_metadata_queries_total,
// berth_object_store_requests_total, berth_channel_calls_total on /metrics) are read before and after,
// and the difference divided by N; the counts are exact whatever the machine does meanwhile. Then the
// latency of a function's ctx.db.first through B (forwarded to A) against the same through A (local),
// one request at a time. Nodes, PostgreSQL and Ceph run on the server core, the requests come from this
// script on the other.
// Environment: BENCH_CLUSTER_REQUESTS (1000) per kind, BENCH_CLUSTER_LATENCY_REQUESTS (2000) per side;
// BENCH_WRITE_DOCS=1 writes docs/benchmarks.md's "Cluster costs" section and docs/benchmarks-cluster.json.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import got, { type Got } from 'got';
import pg from 'pg';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import {
  checkPinning,
  freePort,
  LOAD_CORE,
  pinProcess,
  pinSelf,
  processTree,
  ROOT,
  SERVER_CORE,
  type Server,
  startPinned,
  stopAll,
} from './harness.ts';
import { startCluster } from '../test/helpers/postgres-cluster.ts';
import { startObjectStoreServer } from '../test/helpers/object-store-server.ts';

const REQUESTS = Number(process.env.BENCH_CLUSTER_REQUESTS ?? 1000);
const LATENCY_REQUESTS = Number(process.env.BENCH_CLUSTER_LATENCY_REQUESTS ?? 2000);
const CONCURRENCY = 8;
const WRITE_DOCS = process.env.BENCH_WRITE_DOCS === '1';
const COUNTERS = [
  'berth_metadata_queries_total',
  'berth_object_store_requests_total',
  'berth_channel_calls_total',
] as const;
type Counts = Record<(typeof COUNTERS)[number], number>;

interface Node {
  name: string;
  server: Server;
  origin: string;
  port: number;
  metrics: string;
}

interface CostRow {
  kind: string;
  through: string;
  requests: number;
  metadataQueries: number;
  objectStoreRequests: number;
  channelCalls: number;
}

interface Latency {
  through: string;
  n: number;
  mean: number;
  p50: number;
  p99: number;
}

async function startNode(work: string, name: string, env: NodeJS.ProcessEnv): Promise<Node> {
  const dir = path.join(work, name);
  await fs.mkdir(dir, { recursive: true });
  const [port, metricsPort, channelPort] = [await freePort(), await freePort(), await freePort()];
  const server = await startPinned(
    `berth ${name}`,
    SERVER_CORE,
    process.execPath,
    [path.join(ROOT, 'control-plane/cli/berth.js'), 'serve'],
    {
      ...process.env,
      ...env,
      BERTH_PORT: String(port),
      BERTH_DATA_DIR: path.join(dir, 'data'),
      BERTH_NODE_ID: name,
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${channelPort}`,
      BERTH_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
      // No copies to the store during the counts: they are scheduled work, not a request's.
    },
    { ready: (line) => line.includes('"msg":"listening"'), logFile: path.join(dir, 'berth.log') },
  );
  return { name, server, origin: `http://127.0.0.1:${port}`, port, metrics: `http://127.0.0.1:${metricsPort}/metrics` };
}

async function counts(nodes: Node[]): Promise<Counts> {
  const total = Object.fromEntries(COUNTERS.map((name) => [name, 0])) as Counts;
  for (const node of nodes) {
    const text = await got.get(node.metrics).text();
    for (const name of COUNTERS) total[name] += Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  }
  return total;
}

/** Sends `n` requests, `concurrency` at a time; any answer but 200 stops the run. */
async function send(
  n: number,
  concurrency: number,
  request: (i: number) => Promise<{ statusCode: number; body: unknown }>,
): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        const started = performance.now();
        const answer = await request(i);
        times.push(performance.now() - started);
        if (answer.statusCode !== 200)
          throw new Error(`request ${i} answered ${answer.statusCode}: ${String(answer.body).slice(0, 300)}`);
      }
    }),
  );
  return times;
}

const at = (times: number[], p: number) => {
  const sorted = [...times].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

async function main() {
  checkPinning();
  pinSelf(LOAD_CORE);
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-cluster-'));
  const postgres = await startCluster({ durable: true });
  const store = await startObjectStoreServer();
  try {
    for (const pid of processTree(postgres.serverPid())) pinProcess(pid, SERVER_CORE, 'PostgreSQL');
    for (const pid of store.pids()) for (const thread of processTree(pid)) pinProcess(thread, SERVER_CORE, 'Ceph');
    const admin = new pg.Client({ connectionString: postgres.adminUrl });
    await admin.connect();
    await admin.query("CREATE ROLE berth_bench LOGIN PASSWORD 'bench-password'");
    await admin.query('CREATE DATABASE berth_bench OWNER berth_bench');
    await admin.end();
    const s3 = new S3Client({
      endpoint: store.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: store.accessKeyId, secretAccessKey: store.secretAccessKey },
    });
    await s3.send(new CreateBucketCommand({ Bucket: 'berth-cluster-bench' }));
    s3.destroy();
    const shared = {
      BERTH_DATABASE_URL: `postgres://berth_bench:bench-password@127.0.0.1:${postgres.port}/berth_bench`,
      BERTH_MASTER_KEY_FILE: path.join(work, 'master.key'),
      BERTH_OBJECT_STORE: 's3://berth-cluster-bench',
      BERTH_S3_ENDPOINT: store.endpoint,
      BERTH_S3_FORCE_PATH_STYLE: 'true',
      AWS_ACCESS_KEY_ID: store.accessKeyId,
      AWS_SECRET_ACCESS_KEY: store.secretAccessKey,
      AWS_REGION: 'us-east-1',
    };
    const a = await startNode(work, 'node-a', shared);
    const b = await startNode(work, 'node-b', { ...shared, BERTH_ROLES: 'web' });
    const nodes = [a, b];
    const log = await fs.readFile(path.join(work, 'node-a', 'berth.log'), 'utf8');
    const key = /WRITE key:\s+(\S+)/.exec(log)![1]!;
    const accountId = /account:\s+(\S+)/.exec(log)![1]!;
    const api = (node: Node): Got =>
      got.extend({
        prefixUrl: node.origin,
        headers: { authorization: `Bearer ${key}` },
        throwHttpErrors: false,
        retry: { limit: 0 },
      });
    const site = await api(a)
      .post('v0/sites', { json: { accountId, name: 'bench', subdomain: 'bench' } })
      .json<{ id: string; bucketId: string }>();
    await api(a).put(`v0/buckets/${site.bucketId}/objects/web/small.bin`, {
      body: crypto.randomBytes(1024),
      headers: { 'content-type': 'application/octet-stream' },
    });
    for (const [name, file] of [
      ['hello', 'hello-function.ts'],
      ['dbfirst', 'db-first-function.ts'],
    ] as const) {
      await api(a).put(`v0/buckets/${site.bucketId}/objects/api/${name}.ts`, {
        body: await fs.readFile(path.join(ROOT, 'bench', file)),
      });
    }
    const database = await api(a).post(`v0/sites/${site.id}/databases`).json<{ database: { id: string } }>();
    for (const sql of ['CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)', "INSERT INTO kv VALUES ('hello', 'world')"]) {
      await api(a).post(`v0/sites/${site.id}/databases/${database.database.id}/query`, { json: { sql } });
    }
    const onSite = (node: Node) =>
      got.extend({
        prefixUrl: node.origin,
        headers: { host: `bench.localhost:${node.port}` },
        throwHttpErrors: false,
        retry: { limit: 0 },
      });
    const upload = (node: Node) => (i: number) =>
      api(node).put(`v0/buckets/${site.bucketId}/objects/web/up-${node.name}-${i}.bin`, {
        body: crypto.randomBytes(1024),
        headers: { 'content-type': 'application/octet-stream' },
      });

    const kinds: Array<[string, Node, (i: number) => Promise<{ statusCode: number; body: unknown }>]> = [
      ['1 KiB static file', b, () => onSite(b).get('small.bin')],
      ['warm hello function', b, () => onSite(b).get('api/hello')],
      ['ctx.db.first, forwarded', b, () => onSite(b).get('api/dbfirst')],
      ['ctx.db.first, local', a, () => onSite(a).get('api/dbfirst')],
      ['1 KiB upload', b, upload(b)],
    ];
    const costs: CostRow[] = [];
    console.log(
      `What one request costs the shared services (${REQUESTS} requests of each kind, ${CONCURRENCY} at a time; node-a holds the database, node-b is web-only)\n`,
    );
    for (const [kind, node, request] of kinds) {
      await send(50, CONCURRENCY, request); // warm: workers started, caches filled
      const before = await counts(nodes);
      await send(REQUESTS, CONCURRENCY, request);
      const after = await counts(nodes);
      const per = (name: (typeof COUNTERS)[number]) => (after[name] - before[name]) / REQUESTS;
      const row = {
        kind,
        through: node.name,
        requests: REQUESTS,
        metadataQueries: per('berth_metadata_queries_total'),
        objectStoreRequests: per('berth_object_store_requests_total'),
        channelCalls: per('berth_channel_calls_total'),
      };
      costs.push(row);
      console.log(
        `  ${kind.padEnd(26)} via ${node.name}: ${row.metadataQueries.toFixed(2)} metadata statements, ${row.objectStoreRequests.toFixed(2)} object-store requests, ${row.channelCalls.toFixed(2)} channel calls per request`,
      );
    }

    console.log(`\nctx.db.first, one request at a time (${LATENCY_REQUESTS} each)`);
    const latency: Latency[] = [];
    for (const node of [a, b]) {
      const request = () => onSite(node).get('api/dbfirst');
      await send(100, 1, request);
      const times = await send(LATENCY_REQUESTS, 1, request);
      const row = {
        through: node === a ? 'node-a (local)' : 'node-b (forwarded to node-a)',
        n: times.length,
        mean: times.reduce((s, t) => s + t, 0) / times.length,
        p50: at(times, 50),
        p99: at(times, 99),
      };
      latency.push(row);
      console.log(
        `  ${row.through.padEnd(30)} mean ${row.mean.toFixed(2)} ms  p50 ${row.p50.toFixed(2)} ms  p99 ${row.p99.toFixed(2)} ms`,
      );
    }
    const added = latency[1]!.p50 - latency[0]!.p50;
    console.log(
      `  a forwarded ctx.db.first adds ${added.toFixed(2)} ms at p50 (${(latency[1]!.mean - latency[0]!.mean).toFixed(2)} ms on average)`,
    );

    if (WRITE_DOCS)
      await writeDocs({ date: new Date().toISOString(), requests: REQUESTS, concurrency: CONCURRENCY, costs, latency });
    for (const node of nodes) await node.server.stop();
  } finally {
    await stopAll();
    await store.stop();
    postgres.stop();
    await fs.rm(work, { recursive: true, force: true });
  }
}

const START =
  '<!-- cluster costs: written by `BENCH_WRITE_DOCS=1 make bench` (bench/cluster.ts); edit that file, not this section -->';
const END = '<!-- end of cluster costs -->';

async function writeDocs(run: {
  date: string;
  requests: number;
  concurrency: number;
  costs: CostRow[];
  latency: Latency[];
}): Promise<void> {
  const lines = [
    `Run of ${run.date.slice(0, 10)}, ${run.requests} requests of each kind, ${run.concurrency} at a time; node-a holds the site's database, node-b is web-only. Per request:`,
    '',
    '| request | through | metadata statements | object-store requests | channel calls |',
    '|---|---|---|---|---|',
    ...run.costs.map(
      (c) =>
        `| ${c.kind} | ${c.through} | ${c.metadataQueries.toFixed(2)} | ${c.objectStoreRequests.toFixed(2)} | ${c.channelCalls.toFixed(2)} |`,
    ),
    '',
    'A function calling ctx.db.first, one request at a time:',
    '',
    '| through | mean | p50 | p99 |',
    '|---|---|---|---|',
    ...run.latency.map(
      (l) => `| ${l.through} | ${l.mean.toFixed(2)} ms | ${l.p50.toFixed(2)} ms | ${l.p99.toFixed(2)} ms |`,
    ),
  ];
  const mdPath = path.join(ROOT, 'docs/benchmarks.md');
  const md = await fs.readFile(mdPath, 'utf8');
  const start = md.indexOf(START);
  const end = md.indexOf(END);
  if (start < 0 || end < start)
    throw new Error(`docs/benchmarks.md has lost its "Cluster costs" markers:\n${START}\n${END}`);
  await fs.writeFile(mdPath, `${md.slice(0, start + START.length)}\n\n${lines.join('\n')}\n\n${md.slice(end)}`);
  await fs.writeFile(path.join(ROOT, 'docs/benchmarks-cluster.json'), `${JSON.stringify(run, null, 2)}\n`);
  console.log('\nwrote docs/benchmarks.md (Cluster costs) and docs/benchmarks-cluster.json');
}

await main();
