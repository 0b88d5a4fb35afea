// Functions end to end: deploy on write, the deploy endpoint, invocation through the site host,
// redeploys, removal, and the reserved session cookie.
import test from 'ava';
import {
  type ErrorBody,
  type TestBerth,
  type WriteBody,
  createSite,
  deployFixture,
  json,
  putFile,
  startTestBerth,
} from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type FunctionBody = {
  id: string;
  path: string;
  name: string;
  status: string;
  deployedVersionId: string | null;
  lastError: { message: string; line: number; column: number } | null;
};

test('writing api/<name>.ts deploys it; the endpoint passes method, query, headers and bytes both ways', async (t) => {
  const site = await createSite(t0.owner);
  const written = await deployFixture(t0.owner, site.bucketId, 'echo');
  t.like(written.deployment, { siteId: site.id, sourcePath: 'api/echo.ts', status: 'READY' });

  const bytes = Buffer.from([0, 255, 1, 254, 10, 13, 0]);
  const res = await t0.site(site.subdomain).put('api/echo?status=201&x=%20y', {
    body: bytes,
    headers: { 'x-custom': 'kept', cookie: `theme=dark; _berth_session=platform-secret; lang=en` },
    responseType: 'buffer',
  });
  t.is(res.statusCode, 201);
  t.deepEqual(res.body, bytes);
  t.is(res.headers['x-echo-method'], 'PUT');
  t.is(res.headers['x-echo-query'], '?status=201&x=%20y');
  t.is(res.headers['x-echo-custom'], 'kept');
  t.is(res.headers['x-echo-cookie'], 'theme=dark; lang=en', 'the session cookie never reaches the function');
  t.deepEqual(
    res.headers['set-cookie'],
    ['first=1; Path=/', 'second=2; Path=/'],
    'the function cannot set the session cookie',
  );
  t.regex(String(res.headers['berth-request-id']), /^[0-9a-f-]{36}$/);
  t.is(res.headers['content-length'], String(bytes.length));

  for (const method of ['GET', 'POST', 'DELETE', 'PATCH', 'OPTIONS']) {
    const r = await t0.site(site.subdomain)('api/echo', { method: method as 'GET' });
    t.is(r.headers['x-echo-method'], method);
  }
});

test('a function cannot set or clear Berth’s own cookies, whatever their attributes or spelling', async (t) => {
  const site = await createSite(t0.owner);
  const cookies = [
    'kept=1; Path=/',
    `berth_console=planted; Domain=${t0.config.siteHost}; Path=/`,
    '__Host-berth_console=planted; Secure; Path=/',
    '__HOST-Berth_Console=planted; Secure; Path=/',
    ' _berth_session =planted; Path=/',
    '_berth_session=; Max-Age=0; Path=/',
    '=berth_console=nameless; Path=/',
    'nameless-too',
    'also=2; Path=/',
  ];
  const source = `export default () => {
  const headers = new Headers();
  for (const cookie of ${JSON.stringify(cookies)}) headers.append('set-cookie', cookie);
  return new Response('ok', { headers });
};`;
  const written = await putFile(t0.owner, site.bucketId, 'api/cookies.ts', source, 'text/typescript');
  t.is(written.deployment?.status, 'READY');
  const res = await t0.site(site.subdomain).get('api/cookies');
  t.is(res.statusCode, 200);
  t.deepEqual(res.headers['set-cookie'], ['kept=1; Path=/', 'also=2; Path=/']);
});

test('a PRIVATE site still serves its functions anonymously', async (t) => {
  const site = await createSite(t0.owner, { access: 'PRIVATE' });
  await deployFixture(t0.owner, site.bucketId, 'echo');
  t.is((await t0.site(site.subdomain).get('api/echo')).statusCode, 200);
  t.is((await t0.site(site.subdomain).get('')).statusCode, 401);
});

test('sources that break the rules are stored but not deployed, with a precise reason', async (t) => {
  const site = await createSite(t0.owner);
  const cases: Array<[string, string, RegExp, number, number]> = [
    [
      'api/imp.ts',
      'import { x } from "./x.ts";\nexport default () => new Response(x)',
      /cannot import api\/x\.ts: a function imports only the site's modules/,
      1,
      19,
    ],
    [
      'api/reexport.ts',
      'export default () => new Response("");\nexport { y } from "./y.ts";',
      /cannot import api\/y\.ts/,
      2,
      19,
    ],
    [
      'api/req.ts',
      'const fs = require("fs");\nexport default () => new Response("")',
      /require\(\) is not available/,
      1,
      12,
    ],
    [
      'api/dyn.ts',
      'export default async () => {\n  await import("./x.ts");\n  return new Response("");\n}',
      /dynamic import/,
      2,
      9,
    ],
    ['api/syntax.ts', 'export default function (req: Request {\n  return new Response("")\n}', /syntax error/, 1, 39],
    ['api/nohandler.ts', 'const helper = () => 1;\n', /no handler/, 1, 1],
    ['api/nested/deep.ts', 'export default () => new Response("")', /nested/, 0, 0],
  ];
  for (const [path, source, message, line, column] of cases) {
    const res = await putFile(t0.owner, site.bucketId, path, source, 'text/typescript');
    t.is(res.deployment?.status, 'FAILED', path);
    t.regex(res.deployment!.error!.message, message, path);
    t.is(res.deployment!.error!.line, line, `${path} line`);
    t.is(res.deployment!.error!.column, column, `${path} column`);
    const stored = await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/${path}`, { responseType: 'text' });
    t.is(stored.body, source, `${path} is stored`);
  }
  const list = json<{ functions: FunctionBody[] }>(await t0.owner.read.get(`v0/sites/${site.id}/functions`));
  t.deepEqual(
    list.functions.map((f) => [f.path, f.status]),
    [
      ['api/dyn.ts', 'FAILED'],
      ['api/imp.ts', 'FAILED'],
      ['api/nohandler.ts', 'FAILED'],
      ['api/reexport.ts', 'FAILED'],
      ['api/req.ts', 'FAILED'],
      ['api/syntax.ts', 'FAILED'],
    ],
  );
  const call = await t0.site(site.subdomain).get('api/imp');
  t.is(call.statusCode, 404);
  t.is(JSON.parse(call.body).error.code, 'function_not_found');

  // Files that are not function sources deploy nothing.
  const plain = await putFile(t0.owner, site.bucketId, 'api/readme.md', '# notes');
  t.is(plain.deployment, undefined);
});

test('the deploy endpoint deploys a stored source, or answers 422 with the function record', async (t) => {
  const site = await createSite(t0.owner);
  await putFile(t0.owner, site.bucketId, 'api/ok.ts', 'export default () => new Response("ok")');
  const deployed = await t0.owner.api.post(`v0/sites/${site.id}/functions/deploy`, { json: { path: 'api/ok.ts' } });
  t.is(deployed.statusCode, 200);
  t.like(json<{ function: FunctionBody }>(deployed).function, { path: 'api/ok.ts', name: 'ok', status: 'ACTIVE' });

  await putFile(t0.owner, site.bucketId, 'api/broken.ts', 'export default (');
  const failed = await t0.owner.api.post(`v0/sites/${site.id}/functions/deploy`, { json: { path: 'api/broken.ts' } });
  t.is(failed.statusCode, 422);
  const body = json<ErrorBody & { function: FunctionBody }>(failed);
  t.is(body.error.code, 'function_compile_failed');
  t.like(body.function, { path: 'api/broken.ts', status: 'FAILED', deployedVersionId: null });
  t.truthy(body.function.lastError?.line);

  const missing = await t0.owner.api.post(`v0/sites/${site.id}/functions/deploy`, { json: { path: 'api/none.ts' } });
  t.is(missing.statusCode, 404);
  t.is(json(missing).error.code, 'not_found');
  const notFunction = await t0.owner.api.post(`v0/sites/${site.id}/functions/deploy`, {
    json: { path: 'web/index.html' },
  });
  t.is(notFunction.statusCode, 400);
  t.is(json(notFunction).error.code, 'invalid_function_path');

  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
  const archived = await t0.owner.api.post(`v0/sites/${site.id}/functions/deploy`, { json: { path: 'api/ok.ts' } });
  t.is(archived.statusCode, 409);
  t.is(json(archived).error.code, 'site_not_active');
});

test('a failed redeploy keeps serving the last good version; restore and delete follow the source', async (t) => {
  const site = await createSite(t0.owner);
  const v1 = await putFile(t0.owner, site.bucketId, 'api/greet.ts', 'export default () => new Response("one")');
  t.is((await t0.site(site.subdomain).get('api/greet')).body, 'one');

  const bad = await putFile(t0.owner, site.bucketId, 'api/greet.ts', 'export default () => new Response("two"');
  t.is(bad.deployment?.status, 'FAILED');
  t.is((await t0.site(site.subdomain).get('api/greet')).body, 'one');
  const record = json<{ functions: FunctionBody[] }>(await t0.owner.read.get(`v0/sites/${site.id}/functions`))
    .functions[0]!;
  t.is(record.status, 'FAILED');
  t.is(record.deployedVersionId, v1.versionId);

  const v3 = await putFile(
    t0.owner,
    site.bucketId,
    'api/greet.ts',
    'export const handler = () => new Response("three")',
  );
  t.is(v3.deployment?.status, 'READY');
  t.is((await t0.site(site.subdomain).get('api/greet')).body, 'three');

  const restored = await t0.owner.api.post(`v0/files/${v1.fileId}/restore`, {
    json: { versionId: v1.versionId, currentVersionId: v3.versionId },
  });
  t.is(restored.statusCode, 200);
  t.is(json<WriteBody>(restored).deployment?.status, 'READY');
  t.is((await t0.site(site.subdomain).get('api/greet')).body, 'one');

  t.is((await t0.owner.api.delete(`v0/buckets/${site.bucketId}/objects/api/greet.ts`)).statusCode, 200);
  const gone = await t0.site(site.subdomain).get('api/greet');
  t.is(gone.statusCode, 404);
  t.is(JSON.parse(gone.body).error.code, 'function_not_found');
  t.deepEqual(json<{ functions: unknown[] }>(await t0.owner.read.get(`v0/sites/${site.id}/functions`)).functions, []);
});

test('archived sites serve no functions; reconcile redeploys every source and reports it', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'echo');
  await putFile(t0.owner, site.bucketId, 'api/broken.ts', 'export default (');
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
  t.is((await t0.site(site.subdomain).get('api/echo')).statusCode, 404);

  const res = await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ACTIVE', reconcile: true } });
  t.is(res.statusCode, 200);
  const runtime = json<{
    runtime: { status: string; functions: { total: number; ready: number; failed: Array<{ path: string }> } };
  }>(res).runtime;
  t.is(runtime.status, 'FAILED');
  t.is(runtime.functions.total, 2);
  t.is(runtime.functions.ready, 1);
  t.deepEqual(
    runtime.functions.failed.map((f) => f.path),
    ['api/broken.ts'],
  );
  t.is((await t0.site(site.subdomain).get('api/echo')).statusCode, 200);
  const detail = json<{ runtime: { status: string } }>(await t0.owner.read.get(`v0/sites/${site.id}`));
  t.is(detail.runtime.status, 'FAILED');
});

test('a site created on a bucket that already holds sources deploys them', async (t) => {
  const bucket = json<{ id: string }>(
    await t0.owner.api.post('v0/buckets', { json: { accountId: t0.owner.id, name: 'pre' } }),
  );
  const written = await putFile(t0.owner, bucket.id, 'api/early.ts', 'export default () => new Response("early")');
  t.is(written.deployment, undefined, 'no site yet, nothing to deploy');
  const site = await createSite(t0.owner, { bucketId: bucket.id });
  const res = await t0.site(site.subdomain).get('api/early');
  t.is(res.statusCode, 200);
  t.is(res.body, 'early');
});

test('uncaught errors answer 500 JSON without internals; unknown functions 404', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'runaway');
  const res = await t0.site(site.subdomain).get('api/runaway?mode=throw');
  t.is(res.statusCode, 500);
  t.is(res.headers['content-type'], 'application/json; charset=utf-8');
  const body = JSON.parse(res.body) as ErrorBody;
  t.is(body.error.code, 'function_error');
  t.regex(String(res.headers['berth-request-id']), /^[0-9a-f-]{36}$/, 'a failed call has its request id too');
  t.false(res.body.includes('secret internal detail'));
  t.false(res.body.includes('shim'));
  t.is((await t0.site(site.subdomain).get('api/runaway')).body, 'fine');

  for (const path of ['api/missing', 'api/a/b', 'api/']) {
    const missing = await t0.site(site.subdomain).get(path);
    t.is(missing.statusCode, 404, path);
    t.is(JSON.parse(missing.body).error.code, 'function_not_found');
    t.regex(String(missing.headers['berth-request-id']), /^[0-9a-f-]{36}$/);
  }
});

test('console output is kept per site with function and request id, newest first', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'logger');
  const first = await t0.site(site.subdomain).get('api/logger');
  await t0.site(site.subdomain).get('api/logger');
  type LogLine = { functionPath: string; requestId: string; level: string; message: string };
  const page = json<{ logs: LogLine[]; pagination: { hasMore: boolean } }>(
    await t0.owner.read.get(`v0/sites/${site.id}/logs`, { searchParams: { limit: '4' } }),
  );
  t.is(page.logs.length, 4);
  t.true(page.pagination.hasMore);
  t.like(page.logs[0], { functionPath: 'api/logger.ts', level: 'error', message: 'an error' });
  t.like(page.logs[1], { level: 'warn', message: 'a warning' });
  const all = json<{ logs: LogLine[] }>(await t0.owner.read.get(`v0/sites/${site.id}/logs`)).logs;
  const oldest = all.at(-1)!;
  t.is(oldest.requestId, String(first.headers['berth-request-id']));
  t.is(oldest.level, 'info');
  t.regex(oldest.message, /plain log \{ path: "\/api\/logger" \}/);

  const other = await t0.newAccount();
  const foreign = await other.read.get(`v0/sites/${site.id}/logs`);
  t.is(foreign.statusCode, 404);
  t.is(json(foreign).error.code, 'not_found');
});
