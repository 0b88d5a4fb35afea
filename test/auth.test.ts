// Authentication and authorization across every route of the API, driven by the route table itself
// so that a new route cannot skip the matrix.
import test from 'ava';
import type { Got } from 'got';
import { apiRoutes } from '../control-plane/http/routes/index.ts';
import {
  type ErrorBody,
  type TestBerth,
  apiClient,
  createSite,
  json,
  putFile,
  startTestBerth,
} from './helpers/berth.ts';
import { createKey, revokeKey } from '../control-plane/services/keys.ts';

let t0: TestBerth;
const ids: Record<string, string> = {};
const MIGRATION = { name: '0001_init.sql', sql: 'CREATE TABLE t (x);' };

test.before(async () => {
  t0 = await startTestBerth();
  const site = await createSite(t0.owner, { subdomain: 'auth-matrix' });
  const written = await putFile(t0.owner, site.bucketId, 'web/index.html', '<p>hi</p>', 'text/html');
  await t0.owner.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'API_TOKEN', value: 'secret' } });
  await t0.owner.api.post(`v0/sites/${site.id}/domains`, { json: { hostname: 'auth.example.com' } });
  const deployment = (
    await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
      json: { files: [{ path: 'web/deployed.html', content: 'deployed' }] },
    })
  ).body as unknown as { deployment: { id: string; missing: string[] } };
  const database = (await t0.owner.api.post(`v0/sites/${site.id}/databases`)).body as unknown as {
    database: { id: string };
  };
  await t0.owner.api.post(`v0/sites/${site.id}/databases/${database.database.id}/migrations`, {
    json: { ...MIGRATION, confirm: true },
  });
  Object.assign(ids, {
    accountId: t0.owner.id,
    bucketId: site.bucketId,
    siteId: site.id,
    fileId: written.fileId,
    versionId: written.versionId,
    path: 'web/index.html',
    name: 'API_TOKEN',
    hostname: 'auth.example.com',
    deploymentId: deployment.deployment.id,
    sha256: 'a'.repeat(64),
    databaseId: database.database.id,
    migrationName: MIGRATION.name,
    exportId: json<{ export: { id: string } }>(
      await t0.owner.api.post(`v0/sites/${site.id}/databases/${database.database.id}/exports`),
    ).export.id,
  });
});
test.after.always(async () => {
  await t0?.dispose();
});

/** A concrete URL for a route template, using the owner's resources. */
function urlFor(template: string): string {
  return template
    .replace('{*path}', ids.path!)
    .replace(/:(\w+)/g, (_, name: string) => ids[name]!)
    .replace(/^\//, '');
}

/** Keys, members, invitations, CLI approvals and passwords: never an API key's business. */
const forUsersOnly = (route: (typeof apiRoutes)[number]) =>
  'operation' in route && (route.operation.audience === 'users' || route.operation.audience === 'user-admins');

function errorCode(res: { body: unknown }): string | undefined {
  return (JSON.parse(json<Buffer>(res).toString('utf8')) as ErrorBody).error?.code;
}

/** A valid body and query for each route, so that only authorization can refuse the request. */
function requestFor(route: (typeof apiRoutes)[number]) {
  const query: Record<string, string> = {};
  if (route.path === '/v0/buckets' || route.path === '/v0/sites') query.accountId = ids.accountId!;
  if (route.path.endsWith('/snapshot')) query.at = new Date().toISOString();
  const bodies: Record<string, unknown> = {
    updateAccount: { name: 'Renamed' },
    createBucket: { accountId: ids.accountId, name: 'New bucket' },
    updateBucket: { name: 'Renamed bucket' },
    createSite: { accountId: ids.accountId, name: 'Another' },
    updateSite: { name: 'Renamed site' },
    restoreFileVersion: { versionId: ids.versionId, currentVersionId: ids.versionId },
    deployFunction: { path: 'api/hello.ts' },
    setSecret: { name: 'NEW_SECRET', value: 'v' },
    replaceSecret: { value: 'v2' },
    addDomain: { hostname: 'another.example.com' },
    createDeployment: { files: [{ path: 'web/auth.html', content: 'auth' }] },
    updateDeployment: { previewAccess: 'PUBLIC' },
    restoreSite: { at: new Date().toISOString() },
    updateDomain: { canonical: true },
    queryDatabase: { sql: 'SELECT 1' },
    applyDatabaseMigration: { ...MIGRATION, confirm: true },
    applyDatabaseMigrations: { migrations: [MIGRATION], confirm: true },
    deleteDatabase: { confirmationCode: 'DELETE-AAAAAAAA' },
    restoreDatabase: { at: new Date().toISOString() },
  };
  const json = bodies[route.operationId];
  return {
    method: route.method,
    // Some routes answer raw bytes: read every answer as bytes and decode JSON where it is JSON.
    responseType: 'buffer' as const,
    searchParams: route.method === 'GET' ? query : {},
    ...(json ? { json } : route.method === 'PUT' ? { body: 'new bytes' } : {}),
  };
}

/** A live stream never ends by itself: its status is the answer, with the body of a refusal. */
const streams = (route: (typeof apiRoutes)[number]) =>
  !('operation' in route) && route.responses[200]?.contentType === 'text/event-stream';

function send(client: Got, route: (typeof apiRoutes)[number]): Promise<{ statusCode: number; body: unknown }> {
  if (!streams(route)) return client(urlFor(route.path), requestFor(route));
  return new Promise((resolve, reject) => {
    const request = client.stream(urlFor(route.path));
    request.once('error', reject);
    request.once('response', async (res: { statusCode: number }) => {
      if (res.statusCode === 200) {
        request.destroy();
        resolve({ statusCode: 200, body: Buffer.alloc(0) });
        return;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      resolve({ statusCode: res.statusCode, body: Buffer.concat(chunks) });
    });
  });
}

test('every route answers 401 unauthorized without a key', async (t) => {
  for (const route of apiRoutes) {
    const res = await send(t0.anonymous, route);
    t.is(res.statusCode, 401, `${route.method} ${route.path}`);
    t.is(errorCode(res), 'unauthorized');
  }
});

test('unknown, malformed and revoked keys answer 401', async (t) => {
  const { id, key } = await createKey(t0.berth.deps, { accountId: t0.owner.id, permission: 'WRITE' });
  t.is((await apiClient(t0.url, key).get('v0/accounts/current')).statusCode, 200);
  await revokeKey(t0.berth.deps, id);
  for (const headers of [
    { authorization: `Bearer ${key}` },
    { authorization: 'Bearer berth_not-a-real-key' },
    { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
    { authorization: 'Bearer' },
    { 'x-api-key': 'nope' },
  ]) {
    const res = await t0.anonymous.get('v0/accounts/current', { headers });
    t.is(res.statusCode, 401, JSON.stringify(headers));
    t.is(json(res).error.code, 'unauthorized');
  }
});

test('X-API-Key works like a bearer token', async (t) => {
  const res = await t0.anonymous.get('v0/accounts/current', { headers: { 'x-api-key': t0.owner.readKey } });
  t.is(res.statusCode, 200);
  t.is(json<{ id: string }>(res).id, t0.owner.id);
});

test('READ keys may use every read route and no write route', async (t) => {
  const before = await t0.owner.read.get(`v0/buckets/${ids.bucketId}/objects`);
  for (const route of apiRoutes) {
    const res = await send(t0.owner.read, route);
    if (forUsersOnly(route)) {
      t.is(res.statusCode, 403, `${route.method} ${route.path}`);
      t.is(errorCode(res), 'forbidden');
    } else if (route.method === 'GET') {
      t.is(res.statusCode, 200, `${route.method} ${route.path}`);
    } else {
      t.is(res.statusCode, 403, `${route.method} ${route.path}`);
      t.is(errorCode(res), 'forbidden');
    }
  }
  // Nothing ran: the file still has its single version and the account its name.
  const versions = await t0.owner.read.get(`v0/files/${ids.fileId}/versions`);
  t.is(json<{ versions: unknown[] }>(versions).versions.length, 1);
  t.deepEqual((await t0.owner.read.get(`v0/buckets/${ids.bucketId}/objects`)).body, before.body);
  t.is(json<{ name: string }>(await t0.owner.read.get('v0/accounts/current')).name, 'Owner');
});

test('HEAD and OPTIONS are read methods', async (t) => {
  const head = await t0.owner.read.head(`v0/buckets/${ids.bucketId}/objects/web/index.html`);
  t.is(head.statusCode, 200);
  t.is(head.headers['berth-file-id'], ids.fileId);
  const options = await t0.owner.read(`v0/buckets/${ids.bucketId}`, { method: 'OPTIONS' });
  t.is(options.statusCode, 200);
  t.regex(String(options.headers.allow), /POST/);
});

test('another account’s key reaches none of the owner’s resources, on any route', async (t) => {
  const other = await t0.newAccount();
  for (const route of apiRoutes) {
    if (route.path.startsWith('/v0/accounts/current')) continue;
    const res = await send(other.api, route);
    t.is(res.statusCode, forUsersOnly(route) ? 403 : 404, `${route.method} ${route.path}`);
    t.is(errorCode(res), forUsersOnly(route) ? 'forbidden' : 'not_found');
  }
  // Nothing changed on the owner's side.
  const file = await t0.owner.read.get(`v0/buckets/${ids.bucketId}/objects/web/index.html`, { responseType: 'text' });
  t.is(file.body, '<p>hi</p>');
  const sites = await t0.owner.read.get('v0/sites', { searchParams: { accountId: ids.accountId } });
  t.is(json<{ sites: unknown[] }>(sites).sites.length, 1);
});

test('unknown routes answer a JSON 404 and wrong methods 405', async (t) => {
  const missing = await t0.owner.api.get('v0/nothing-here');
  t.is(missing.statusCode, 404);
  t.is(json(missing).error.code, 'not_found');
  const wrongMethod = await t0.owner.api.delete(`v0/sites/${ids.siteId}`);
  t.is(wrongMethod.statusCode, 405);
  t.is(json(wrongMethod).error.code, 'method_not_allowed');
});
