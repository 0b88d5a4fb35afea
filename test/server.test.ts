// `berth serve` and `berth admin` as real processes: first-run keys, request logs, graceful
// shutdown, restarts that keep every byte, and operator commands beside a running server.
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import got from 'got';
import { apiClient, json, makeDataDir } from './helpers/berth.ts';
import { runBerth, startServe } from './helpers/process.ts';
import { ownerOf } from './helpers/served.ts';

test('first run prints owner keys once; data survives a restart; logs hold no secrets', async (t) => {
  const dataDir = await makeDataDir(t);
  const first = await startServe({ BERTH_DATA_DIR: dataDir });
  const owner = ownerOf(first);
  const api = owner.api;

  const site = json<{ id: string; bucketId: string; subdomain: string }>(
    await api.post('v0/sites', { json: { accountId: owner.id, name: 'Kept', subdomain: 'kept' } }),
  );
  const bytes = Buffer.from([0, 1, 2, 254, 255]);
  const put = await api.put(`v0/buckets/${site.bucketId}/objects/web/data.bin`, { body: bytes });
  t.is(put.statusCode, 200);

  // Functions have a lean path of their own, with the same log line and request id.
  await api.put(`v0/buckets/${site.bucketId}/objects/api/hi.ts`, { body: 'export default () => new Response("hi");' });
  const port = new URL(first.url).port;
  const called = await got(`${first.url}/%61pi/hi?token=not-for-logs`, {
    headers: { host: `kept.localhost:${port}` },
    throwHttpErrors: false,
  });
  t.is(called.body, 'hi');
  const requestId = String(called.headers['berth-request-id']);

  // One log line per request: method, path, status, duration, and never a key. Lines are written
  // asynchronously: wait until the function request's has arrived.
  const requestLines = () =>
    first
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l));
  for (let i = 0; i < 100 && !requestLines().some((l) => l.reqId === requestId); i++) await sleep(50);
  const logLines = requestLines();
  const putLine = logLines.find((l) => l.method === 'PUT');
  t.like(putLine, { method: 'PUT', path: `/v0/buckets/${site.bucketId}/objects/web/data.bin`, status: 200 });
  t.is(typeof putLine.ms, 'number');
  t.like(
    logLines.find((l) => l.reqId === requestId),
    { kind: 'site', host: 'kept', method: 'GET', path: '/%61pi/hi', status: 200 },
  );
  t.false(first.output().includes('not-for-logs'), 'query strings are never logged');
  const afterBanner = first.output().slice(first.output().indexOf('"msg":"listening"'));
  t.false(afterBanner.includes(owner.writeKey));
  t.false(afterBanner.includes(owner.readKey));

  first.child.kill('SIGTERM');
  t.is(await first.exited, 0);

  const second = await startServe({ BERTH_DATA_DIR: dataDir });
  t.false(second.output().includes('WRITE key'), 'keys are printed on first run only');
  const again = apiClient(second.url, owner.readKey);
  const file = await again.get(`v0/buckets/${site.bucketId}/objects/web/data.bin`, { responseType: 'buffer' });
  t.is(file.statusCode, 200);
  t.deepEqual(file.body, bytes);
  const versions = await again.get(`v0/files/${json<{ fileId: string }>(put).fileId}/versions`);
  t.is(json<{ versions: unknown[] }>(versions).versions.length, 1);
  second.child.kill('SIGTERM');
  t.is(await second.exited, 0);
});

test('SIGTERM lets a request in flight finish, then the server exits', async (t) => {
  const dataDir = await makeDataDir(t);
  const server = await startServe({ BERTH_DATA_DIR: dataDir });
  const owner = ownerOf(server);
  const api = owner.api;
  const bucket = json<{ id: string }>(await api.post('v0/buckets', { json: { accountId: owner.id, name: 'b' } }));

  // An upload that is still sending when the signal arrives.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  async function* slowBody() {
    yield Buffer.from('first half, ');
    await gate;
    yield Buffer.from('second half');
  }
  const upload = api.put(`v0/buckets/${bucket.id}/objects/slow.txt`, { body: Readable.from(slowBody()) });
  await sleep(300);
  server.child.kill('SIGTERM');
  await sleep(300);
  release();

  const res = await upload;
  t.is(res.statusCode, 200);
  t.is(json<{ bytes: number }>(res).bytes, 'first half, second half'.length);
  t.is(await server.exited, 0);
  t.true(server.output().includes('"msg":"stopped"'));
});

test('admin commands work beside a running server, with --json', async (t) => {
  const dataDir = await makeDataDir(t);
  const server = await startServe({ BERTH_DATA_DIR: dataDir });
  const env = { BERTH_DATA_DIR: dataDir };

  const account = await runBerth(['admin', 'create-account', '--name', 'Team', '--plan', 'builder', '--json'], env);
  t.is(account.code, 0, account.stderr);
  const { account: created } = JSON.parse(account.stdout) as { account: { id: string; name: string } };
  t.is(created.name, 'Team');
  t.deepEqual(Object.keys(JSON.parse(account.stdout).account).sort(), ['id', 'name']);

  const key = await runBerth(['admin', 'create-key', '--account', created.id, '--permission', 'WRITE', '--json'], env);
  t.is(key.code, 0, key.stderr);
  const { key: secret, id: keyId } = JSON.parse(key.stdout) as { key: string; id: string };
  const api = apiClient(server.url, secret);
  const current = await api.get('v0/accounts/current');
  t.is(current.statusCode, 200);
  t.is(json<{ id: string; plan: string }>(current).id, created.id);
  t.is(json<{ id: string; plan: string }>(current).plan, 'builder');
  t.is((await api.post('v0/buckets', { json: { accountId: created.id, name: 'works' } })).statusCode, 201);

  const revoked = await runBerth(['admin', 'revoke-key', '--id', keyId], env);
  t.is(revoked.code, 0, revoked.stderr);
  const after = await api.get('v0/accounts/current');
  t.is(after.statusCode, 401);
  t.is(json(after).error.code, 'unauthorized');

  const listed = await runBerth(['admin', 'list-keys', '--account', created.id, '--json'], env);
  t.is(JSON.parse(listed.stdout).keys[0].revokedAt !== null, true);

  const unknownKey = await runBerth(['admin', 'revoke-key', '--id', crypto.randomUUID(), '--json'], env);
  t.is(unknownKey.code, 1);
  t.is(JSON.parse(unknownKey.stdout).error.code, 'not_found');
  const badPermission = await runBerth(['admin', 'create-key', '--account', created.id, '--permission', 'ADMIN'], env);
  t.is(badPermission.code, 2);
  t.regex(badPermission.stderr, /--permission must be READ or WRITE/);
  const missingName = await runBerth(['admin', 'create-account'], env);
  t.is(missingName.code, 2);

  server.child.kill('SIGTERM');
  t.is(await server.exited, 0);
});

test('invalid configuration stops with a clear message', async (t) => {
  const result = await runBerth(['serve'], { BERTH_PORT: 'eighty', BERTH_DATA_DIR: await makeDataDir(t) });
  t.is(result.code, 2);
  t.regex(result.stderr, /BERTH_PORT must be an integer/);
});
