// Two nodes sharing PostgreSQL metadata and the object store write to one account at once: appends to
// one JSONL file from functions on both all land, each once; uploads on both whose sum passes the
// account's limit never store past it, and each is stored or refused with quota_exceeded. (Nodes share
// PostgreSQL metadata: the PostgreSQL pass.)
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import type { Got } from 'got';
import { apiClient, json, makeDataDir } from './helpers/berth.ts';
import { type ServeProcess, startServe } from './helpers/process.ts';
import { onPostgres } from './helpers/postgres.ts';
import { sharedInstance, siteOn, stopServed } from './helpers/served.ts';
import { DEFAULTS } from '../control-plane/config.ts';
import { openMetadata } from '../control-plane/db/metadata.ts';
import { createAccount } from '../control-plane/services/accounts.ts';
import { createKey } from '../control-plane/services/keys.ts';
import { setStorageLimit } from '../control-plane/services/storage-quota.ts';

const shared = onPostgres ? test.serial : test.skip;

interface Nodes {
  root: string;
  databaseUrl: string;
  a: ServeProcess;
  b: ServeProcess;
}

let nodes: Nodes;

test.before(async () => {
  if (!onPostgres) return;
  const root = await makeDataDir();
  const common = await sharedInstance(root, path.join(root, 'a'));
  const databaseUrl = common.BERTH_DATABASE_URL!;
  const a = await startServe({ ...common, BERTH_DATA_DIR: path.join(root, 'a') });
  const b = await startServe({ ...common, BERTH_DATA_DIR: path.join(root, 'b') });
  nodes = { root, databaseUrl, a, b };
});

test.after.always(async () => {
  await stopServed([nodes?.a, nodes?.b]);
  if (nodes) await fs.rm(nodes.root, { recursive: true, force: true, maxRetries: 10 });
});

/** A new account with its own storage limit: a WRITE key's client on either node, and a READ key's. */
async function newAccount(limitBytes: number) {
  const metadata = await openMetadata({ ...DEFAULTS, databaseUrl: nodes.databaseUrl });
  try {
    const store = { db: metadata.db, now: () => new Date() };
    const account = await createAccount(store, { name: 'Tenant', plan: 'free' });
    await setStorageLimit(store, DEFAULTS, account.id, limitBytes);
    const write = await createKey(store, { accountId: account.id, permission: 'WRITE' });
    const read = await createKey(store, { accountId: account.id, permission: 'READ' });
    return {
      id: account.id,
      on: (server: ServeProcess) => apiClient(server.url, write.key),
      read: apiClient(nodes.a.url, read.key),
    };
  } finally {
    await metadata.close();
  }
}

async function makeSite(api: Got, accountId: string, name: string) {
  const res = await api.post('v0/sites', { json: { accountId, name } });
  if (res.statusCode !== 201) throw new Error(`site: ${res.statusCode} ${JSON.stringify(res.body)}`);
  return json<{ id: string; subdomain: string; bucketId: string }>(res);
}

shared('appends to one file from functions on both nodes all land, each once', async (t) => {
  const { a, b } = nodes;
  const tenant = await newAccount(1024 * 1024 * 1024);
  const site = await makeSite(tenant.on(a), tenant.id, 'appends');
  const source = await fs.readFile(path.join(import.meta.dirname, 'fixtures/functions/appender.ts'));
  const deployed = await tenant.on(a).put(`v0/buckets/${site.bucketId}/objects/api/append.ts`, {
    body: source,
    headers: { 'content-type': 'text/typescript' },
  });
  t.is(json<{ deployment: { status: string } }>(deployed).deployment.status, 'READY');

  const PER_NODE = 20;
  const calls = [a, b].flatMap((server, node) =>
    Array.from({ length: PER_NODE }, (_, i) =>
      siteOn(server, site.subdomain, { timeout: { request: 120_000 } }).get('api/append', {
        searchParams: { n: `${node}-${i}` },
      }),
    ),
  );
  const answers = await Promise.all(calls);
  t.deepEqual(
    answers.filter((res) => res.statusCode !== 200).map((res) => res.body),
    [],
    'every append succeeded',
  );

  const file = await tenant.read.get(`v0/buckets/${site.bucketId}/objects/data/lines.jsonl`, { responseType: 'text' });
  t.is(file.statusCode, 200);
  const lines = (file.body as string)
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { n: string }).n);
  const expected = [0, 1].flatMap((node) => Array.from({ length: PER_NODE }, (_, i) => `${node}-${i}`));
  t.deepEqual([...lines].sort(), [...expected].sort(), 'each line is there exactly once');
});

shared(
  'uploads on both nodes whose sum passes the limit store within it; the rest are refused with quota_exceeded',
  async (t) => {
    const KIB = 1024;
    const LIMIT = 1024 * KIB;
    const SIZE = 300 * KIB;
    const tenant = await newAccount(LIMIT);
    const site = await makeSite(tenant.on(nodes.a), tenant.id, 'quota');

    // Each node alone admits three of its four uploads: together they ask for twice what fits.
    const uploads = [nodes.a, nodes.b].flatMap((server, node) =>
      Array.from({ length: 4 }, async (_, i) => {
        const file = `web/${node}-${i}.bin`;
        const body = Buffer.concat([Buffer.from(crypto.randomUUID()), Buffer.alloc(SIZE - 36, 1)]);
        return { file, res: await tenant.on(server).put(`v0/buckets/${site.bucketId}/objects/${file}`, { body }) };
      }),
    );
    const settled = await Promise.all(uploads);
    const stored = settled.filter(({ res }) => res.statusCode === 200);
    const refused = settled.filter(({ res }) => res.statusCode !== 200);
    t.deepEqual(
      refused.map(({ res }) => {
        const { code, details } = json(res).error;
        return [res.statusCode, code, details?.limitBytes, details?.neededBytes];
      }),
      refused.map(() => [413, 'quota_exceeded', LIMIT, SIZE]),
      'every upload not stored was refused for the quota',
    );
    t.is(stored.length, Math.floor(LIMIT / SIZE), 'as many as fit are stored');

    const usage = json<{ usage: { storage: { usedBytes: number } } }>(
      await tenant.read.get('v0/accounts/current/usage'),
    ).usage.storage;
    t.true(usage.usedBytes <= LIMIT, `${usage.usedBytes} bytes stored past the limit of ${LIMIT}`);
    t.is(usage.usedBytes, stored.length * SIZE, 'what is stored is what succeeded');
    const files = json<{ files: Array<{ path: string }> }>(
      await tenant.read.get(`v0/buckets/${site.bucketId}/objects`),
    );
    t.deepEqual(files.files.map((f) => f.path).sort(), stored.map((s) => s.file).sort());
  },
);
