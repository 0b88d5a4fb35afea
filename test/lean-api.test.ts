// The paths answered outside the Koa stack give the answers the Koa apps give: the API's query
// endpoint on its lean path against the same requests to the API's Koa app alone (on its own port,
// over the same running Berth), and the error answers of every lean path over HTTPS. Berth trusts a
// proxy here, so X-Forwarded-* stands for one.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import test from 'ava';
import got, { type OptionsOfTextResponseBody, type Response } from 'got';
import { createApiApp } from '../control-plane/http/api-app.ts';
import { createLogger } from '../control-plane/log.ts';
import { VERSION } from '../control-plane/version.ts';
import { type TestBerth, createSite, startTestBerth } from './helpers/berth.ts';
import { type SiteWithDatabase, siteWithDatabase } from './helpers/databases.ts';

const MAX_JSON_BYTES = 4096;
let logged = '';
let t0: TestBerth;
let koaOnly: http.Server;
let koaUrl: string;
let own: SiteWithDatabase;
test.before(async () => {
  const log = createLogger('info', false, { write: (text) => (logged += text), flush: (cb) => cb?.() });
  t0 = await startTestBerth({ trustProxy: true, maxJsonBytes: MAX_JSON_BYTES }, { log });
  koaOnly = http.createServer(createApiApp(t0.berth.deps, VERSION).callback());
  await new Promise<void>((resolve) => koaOnly.listen(0, '127.0.0.1', resolve));
  koaUrl = `http://127.0.0.1:${(koaOnly.address() as AddressInfo).port}`;
  own = await siteWithDatabase(t0.owner);
  await own.query('CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)');
  await own.query("INSERT INTO kv VALUES ('hello', 'world')");
});
test.after.always(async () => {
  koaOnly?.close();
  await t0?.dispose();
});

const overHttps = { 'x-forwarded-proto': 'https' };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Options = Omit<OptionsOfTextResponseBody, 'body'> & { body?: () => string | Readable };

function send(base: string, path: string, options: Options): Promise<Response<string>> {
  const { body, ...rest } = options;
  return got(`${base}/${path}`, {
    method: 'POST',
    throwHttpErrors: false,
    retry: { limit: 0 },
    ...rest,
    ...(body ? { body: body() } : {}),
  } as OptionsOfTextResponseBody);
}

/** The answer's body with what differs from one run of a statement to the next (its duration) taken out. */
function comparable(res: Response<string>): unknown {
  if (!res.headers['content-type']?.startsWith('application/json')) return res.body;
  const body = JSON.parse(res.body) as { result?: Array<{ meta?: { duration?: number } }> };
  for (const result of body.result ?? []) if (result.meta) result.meta.duration = 0;
  return body;
}

/** The same request to the lean path (Berth's port) and to the Koa app alone: the same answer, head and body. */
async function sameAnswer(
  t: import('ava').ExecutionContext,
  what: string,
  path: string,
  options: Options,
): Promise<Response<string>> {
  const lean = await send(t0.url, path, options);
  const koa = await send(koaUrl, path, options);
  t.is(lean.statusCode, koa.statusCode, what);
  t.is(lean.statusMessage, koa.statusMessage, what);
  t.deepEqual(comparable(lean), comparable(koa), what);
  const names = (res: Response<string>) => res.rawHeaders.filter((_, i) => i % 2 === 0).map((h) => h.toLowerCase());
  t.deepEqual(names(lean), names(koa), `${what}: the same headers in the same order`);
  for (const header of ['content-type', 'connection', 'allow']) t.is(lean.headers[header], koa.headers[header], what);
  for (const res of [lean, koa]) {
    t.is(Number(res.headers['content-length']), Buffer.byteLength(res.body), what);
    t.regex(String(res.headers['berth-request-id']), UUID, what);
  }
  return lean;
}

const queryPath = (site: { id: string }, db: { id: string }) => `v0/sites/${site.id}/databases/${db.id}/query`;
const asJson = (value: unknown) => ({
  headers: { 'content-type': 'application/json' },
  body: () => JSON.stringify(value),
});

test('the lean query path answers every outcome as the Koa route does', async (t) => {
  const path = queryPath(own.site, own.db);
  const write = { authorization: `Bearer ${t0.owner.writeKey}` };
  const cases: Array<[string, Options, number, string?]> = [
    ['a read', { ...asJson({ sql: 'SELECT v FROM kv WHERE k = ?', params: ['hello'] }), headers: write }, 200],
    ['a write', { ...asJson({ sql: "UPDATE kv SET v = 'world' WHERE k = 'hello'" }), headers: write }, 200],
    ['X-API-Key', { ...asJson({ sql: 'SELECT 1' }), headers: { 'x-api-key': t0.owner.writeKey } }, 200],
    ['a failed statement', { ...asJson({ sql: 'SELECT * FROM missing' }), headers: write }, 400],
    ['a write asked read-only', { ...asJson({ sql: 'DELETE FROM kv', readOnly: true }), headers: write }, 400],
    ['two statements', { ...asJson({ sql: 'SELECT 1; SELECT 2' }), headers: write }, 400, 'multiple_statements'],
    ['no statement', { ...asJson({ sql: ' -- nothing' }), headers: write }, 400, 'invalid_request'],
    ['malformed JSON', { headers: write, body: () => '{"sql":' }, 400, 'invalid_json'],
    ['a JSON array', { ...asJson([{ sql: 'SELECT 1' }]), headers: write }, 400, 'invalid_request'],
    ['an empty body', { headers: write }, 400, 'invalid_request'],
    ['an unknown field', { ...asJson({ sql: 'SELECT 1', limit: 5 }), headers: write }, 400, 'invalid_request'],
    [
      'a path field in the body',
      { ...asJson({ sql: 'SELECT 1', siteId: 'x' }), headers: write },
      400,
      'invalid_request',
    ],
    [
      'params of the wrong type',
      { ...asJson({ sql: 'SELECT ?', params: [{}] }), headers: write },
      400,
      'invalid_request',
    ],
    [
      'a body past the JSON limit, by its length',
      { ...asJson({ sql: `SELECT '${'x'.repeat(MAX_JSON_BYTES)}'` }), headers: write },
      413,
      'payload_too_large',
    ],
    [
      'a body past the JSON limit, chunked',
      {
        headers: write,
        body: () =>
          Readable.from([Buffer.from('{"sql":"SELECT \''), Buffer.alloc(MAX_JSON_BYTES, 'x'), Buffer.from('\'"}')]),
      },
      413,
      'payload_too_large',
    ],
    [
      'a READ key',
      { ...asJson({ sql: 'SELECT 1' }), headers: { authorization: `Bearer ${t0.owner.readKey}` } },
      403,
      'forbidden',
    ],
    [
      'an unknown key',
      { ...asJson({ sql: 'SELECT 1' }), headers: { authorization: 'Bearer berth_nothing' } },
      401,
      'unauthorized',
    ],
    [
      'not a bearer token',
      { ...asJson({ sql: 'SELECT 1' }), headers: { authorization: 'Basic eDp5' } },
      401,
      'unauthorized',
    ],
    ['no key', asJson({ sql: 'SELECT 1' }), 401, 'unauthorized'],
  ];
  for (const [what, options, status, code] of cases) {
    const answer = await sameAnswer(t, what, path, options);
    t.is(answer.statusCode, status, what);
    if (code) t.is(JSON.parse(answer.body).error.code, code, what);
  }
  const rows = await sameAnswer(t, 'rows', path, {
    ...asJson({ sql: 'SELECT v FROM kv WHERE k = ?', params: ['hello'] }),
    headers: write,
  });
  t.deepEqual(JSON.parse(rows.body).result[0].results, [{ v: 'world' }]);
});

test('another account, another site or another database is not found on the lean path, as on the Koa route', async (t) => {
  const stranger = await t0.newAccount();
  const sibling = await siteWithDatabase(t0.owner);
  const plainSite = await createSite(t0.owner);
  const body = asJson({ sql: 'SELECT 1' });
  const write = { authorization: `Bearer ${t0.owner.writeKey}` };
  const cases: Array<[string, string, Record<string, string>]> = [
    ['a key of another account', queryPath(own.site, own.db), { authorization: `Bearer ${stranger.writeKey}` }],
    ['the database of a sibling site', queryPath(own.site, sibling.db), write],
    ['a site without a database', queryPath(plainSite, own.db), write],
    ['a site that does not exist', queryPath({ id: crypto.randomUUID() }, own.db), write],
    ['a database that does not exist', queryPath(own.site, { id: crypto.randomUUID() }), write],
  ];
  for (const [what, path, headers] of cases) {
    const answer = await sameAnswer(t, what, path, { ...body, headers });
    t.is(answer.statusCode, 404, what);
    t.is(JSON.parse(answer.body).error.code, 'not_found', what);
  }
  const ownRows = await send(t0.url, queryPath(sibling.site, sibling.db), { ...body, headers: write });
  t.is(ownRows.statusCode, 200, 'the sibling answers its own database');
});

test.serial(
  'a lean query logs the Koa route’s line (client address from the proxy), counts as it does, and sends HSTS over HTTPS',
  async (t) => {
    const path = queryPath(own.site, own.db);
    const proxied = { 'x-forwarded-for': '198.51.100.7, 203.0.113.9', ...overHttps };
    const write = { authorization: `Bearer ${t0.owner.writeKey}`, ...proxied };
    const read = { authorization: `Bearer ${t0.owner.readKey}`, ...proxied };
    const counts = async () => {
      const metric = t0.berth.deps.metrics.registry.getSingleMetric('berth_http_requests_total')!;
      const { values } = await (
        metric as unknown as { get(): Promise<{ values: Array<{ labels: object; value: number }> }> }
      ).get();
      return new Map(values.map((v) => [JSON.stringify(v.labels), v.value]));
    };
    /** What `request` added to the request counter, by labels. */
    const counted = async (request: () => Promise<Response<string>>) => {
      const before = await counts();
      const res = await request();
      const added = [...(await counts())].filter(([labels, value]) => value !== (before.get(labels) ?? 0));
      return { res, added: added.map(([labels, value]) => [labels, value - (before.get(labels) ?? 0)]) };
    };
    const body = asJson({ sql: 'SELECT 1' });
    const lean = await counted(() => send(t0.url, path, { ...body, headers: write }));
    const koa = await counted(() => send(koaUrl, path, { ...body, headers: write }));
    const leanRefused = await counted(() => send(t0.url, path, { ...body, headers: read }));
    const koaRefused = await counted(() => send(koaUrl, path, { ...body, headers: read }));
    t.is(lean.res.statusCode, 200);
    t.is(leanRefused.res.statusCode, 403);
    t.deepEqual(lean.added, [
      [JSON.stringify({ kind: 'api', route: '/v0/sites/:siteId/databases/:databaseId/query', status: '200' }), 1],
    ]);
    t.deepEqual(lean.added, koa.added);
    t.deepEqual(leanRefused.added, koaRefused.added, 'a request refused before routing counts as Koa counts it');
    t.is(lean.res.headers['strict-transport-security'], 'max-age=31536000');
    t.is(leanRefused.res.headers['strict-transport-security'], 'max-age=31536000', 'an error answer keeps it too');

    await nextTurn();
    const lines = logged
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const lineOf = (res: Response<string>) => {
      const line = lines.find((l) => l.reqId === res.headers['berth-request-id']);
      if (!line) return undefined;
      const { reqId: _, time: __, ms, ...rest } = line;
      t.is(typeof ms, 'number');
      return rest;
    };
    const expected = { msg: 'request', kind: 'api', method: 'POST', path: `/${path}`, ip: '203.0.113.9' };
    t.like(lineOf(lean.res), { ...expected, status: 200 });
    t.deepEqual(lineOf(lean.res), lineOf(koa.res), 'the lean line is the Koa line, field for field and in order');
    t.like(lineOf(leanRefused.res), { ...expected, status: 403 });
    t.deepEqual(lineOf(leanRefused.res), lineOf(koaRefused.res));
    t.false(logged.includes(t0.owner.writeKey), 'no key is logged');
  },
);

test('an error answer of a lean site path over HTTPS keeps Strict-Transport-Security', async (t) => {
  const site = await createSite(t0.owner);
  const missingFunction = await t0.site(site.subdomain).get('api/missing', { headers: overHttps });
  t.is(missingFunction.statusCode, 404);
  t.is(JSON.parse(missingFunction.body).error.code, 'function_not_found');
  t.is(missingFunction.headers['strict-transport-security'], 'max-age=31536000');
  const served = await t0.site(site.subdomain).get('', { headers: overHttps });
  t.is(served.headers['strict-transport-security'], 'max-age=31536000', 'as on an answer that is not an error');
});
