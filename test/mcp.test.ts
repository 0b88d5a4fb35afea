// The MCP front door, driven by the SDK's own client over Streamable HTTP: every tool's success path,
// READ-key filtering and refusal, the 256 KiB text limit, and errors reported as the error envelope.
import test from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import got from 'got';
import { type TestBerth, createSite, putFile, startTestBerth } from './helpers/berth.ts';
import { MCP_TOOL_NAMES } from '../control-plane/mcp/tools.ts';
import { until } from './helpers/until.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'berth-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${t0.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

type Result = { isError?: boolean; structuredContent?: Record<string, any> };

/** Calls a tool and returns its structured result, failing the test on an error result. */
async function call(client: Client, name: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  const result = (await client.callTool({ name, arguments: args })) as Result;
  if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result.structuredContent)}`);
  return result.structuredContent!;
}

async function callError(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<{ code: string; message: string }> {
  const result = (await client.callTool({ name, arguments: args })) as Result;
  if (!result.isError) throw new Error(`${name} was expected to fail`);
  return result.structuredContent!.error;
}

test('a WRITE key lists the spec’s 25 tools and the others with input schemas and hints', async (t) => {
  const client = await connect(t0.owner.writeKey);
  t.teardown(() => client.close());
  const { tools } = await client.listTools();
  t.deepEqual(tools.map((tool) => tool.name).sort(), [...MCP_TOOL_NAMES].sort());
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  t.like(byName.get('list_sites')!.annotations, { readOnlyHint: true, destructiveHint: false });
  t.like(byName.get('delete_file')!.annotations, { readOnlyHint: false, destructiveHint: true });
  t.like(byName.get('create_site')!.annotations, { readOnlyHint: false, destructiveHint: false });
  const createSiteSchema = byName.get('create_site')!.inputSchema as {
    required: string[];
    properties: Record<string, unknown>;
  };
  t.deepEqual(createSiteSchema.required.sort(), ['accountId', 'name']);
  t.truthy(createSiteSchema.properties.subdomain);
  // A site restored whole, and a preview's branch of the database, through the same tools as REST.
  const properties = (name: string) =>
    (byName.get(name)!.inputSchema as { properties: Record<string, unknown> }).properties;
  t.like(properties('restore_site').database, { type: 'boolean' });
  t.like(properties('query_database').branch, { type: 'string' });
});

test('every tool works end to end, with structured content and text', async (t) => {
  const client = await connect(t0.owner.writeKey);
  t.teardown(() => client.close());
  const accountId = t0.owner.id;

  const bucket = await call(client, 'create_bucket', { accountId, name: 'mcp bucket' });
  t.is((await call(client, 'get_bucket', { bucketId: bucket.id })).name, 'mcp bucket');
  t.is((await call(client, 'update_bucket', { bucketId: bucket.id, name: 'renamed' })).name, 'renamed');
  t.true(
    (await call(client, 'list_buckets', { accountId, limit: 200 })).buckets.some(
      (b: { id: string }) => b.id === bucket.id,
    ),
  );

  const site = await call(client, 'create_site', { accountId, name: 'MCP site' });
  t.is((await call(client, 'get_site', { siteId: site.id })).id, site.id);
  t.is((await call(client, 'update_site', { siteId: site.id, access: 'PRIVATE' })).access, 'PRIVATE');
  await call(client, 'update_site', { siteId: site.id, access: 'PUBLIC' });
  t.true((await call(client, 'list_sites', { accountId, subdomain: site.subdomain })).sites.length === 1);

  const first = await call(client, 'write_file', {
    bucketId: site.bucketId,
    path: 'web/index.html',
    content: '<h1>one</h1>',
    contentType: 'text/html',
  });
  const second = await call(client, 'write_file', {
    bucketId: site.bucketId,
    path: 'web/index.html',
    content: '<h1>two</h1>',
    contentType: 'text/html',
    ifMatch: first.versionId,
  });
  t.is((await t0.site(site.subdomain).get('')).body, '<h1>two</h1>');
  const listed = await call(client, 'list_files', { bucketId: site.bucketId, prefix: 'web/' });
  t.deepEqual(
    listed.files.map((f: { path: string }) => f.path),
    ['web/index.html'],
  );
  t.like(await call(client, 'read_file', { bucketId: site.bucketId, path: 'web/index.html' }), {
    content: '<h1>two</h1>',
    contentType: 'text/html',
    versionId: second.versionId,
  });
  const versions = await call(client, 'list_file_versions', { fileId: first.fileId });
  t.is(versions.versions.length, 2);
  t.is(
    (await call(client, 'read_file_version', { fileId: first.fileId, versionId: first.versionId })).content,
    '<h1>one</h1>',
  );
  const restored = await call(client, 'restore_file_version', {
    fileId: first.fileId,
    versionId: first.versionId,
    currentVersionId: second.versionId,
  });
  t.is(restored.restoredFromVersionId, first.versionId);
  t.is((await t0.site(site.subdomain).get('')).body, '<h1>one</h1>');

  const fn = await call(client, 'write_file', {
    bucketId: site.bucketId,
    path: 'api/hello.ts',
    content: 'export default () => new Response("hi from mcp");',
  });
  t.is(fn.deployment.status, 'READY', 'write_file returns the deployment result');
  t.is((await t0.site(site.subdomain).get('api/hello')).body, 'hi from mcp');
  t.deepEqual(
    (await call(client, 'list_functions', { siteId: site.id })).functions.map((f: { path: string }) => f.path),
    ['api/hello.ts'],
  );
  t.like(await call(client, 'delete_file', { bucketId: site.bucketId, path: 'web/index.html' }), {
    path: 'web/index.html',
  });

  t.like((await call(client, 'set_secret', { siteId: site.id, name: 'TOKEN', value: 's3cret' })).secret, {
    name: 'TOKEN',
  });
  t.deepEqual(
    (await call(client, 'list_secrets', { siteId: site.id })).secrets.map((s: { name: string }) => s.name),
    ['TOKEN'],
  );
  t.like(await call(client, 'delete_secret', { siteId: site.id, name: 'TOKEN' }), { deleted: true });

  const { database } = await call(client, 'create_database', { siteId: site.id });
  t.is(database.status, 'READY');
  t.deepEqual(
    (await call(client, 'list_databases', { siteId: site.id })).databases.map((d: { id: string }) => d.id),
    [database.id],
  );
  const migration = { name: '0001_notes.sql', sql: 'CREATE TABLE notes (body TEXT);' };
  t.like(
    await call(client, 'apply_database_migration', {
      siteId: site.id,
      databaseId: database.id,
      ...migration,
      confirm: true,
    }),
    { alreadyApplied: false },
  );
  t.deepEqual(
    (await call(client, 'list_database_migrations', { siteId: site.id, databaseId: database.id })).applied.map(
      (r: { name: string }) => r.name,
    ),
    ['0001_notes.sql'],
  );
  t.like(
    (
      await call(client, 'get_database_migration', {
        siteId: site.id,
        databaseId: database.id,
        migrationName: '0001_notes.sql',
      })
    ).migration,
    { sql: migration.sql },
  );
  await call(client, 'query_database', {
    siteId: site.id,
    databaseId: database.id,
    sql: 'INSERT INTO notes VALUES (?)',
    params: ['hello'],
  });
  const rows = await call(client, 'query_database', {
    siteId: site.id,
    databaseId: database.id,
    sql: 'SELECT body FROM notes',
  });
  t.deepEqual(rows.result[0].results, [{ body: 'hello' }]);
  // Time travel: the range the replica holds, and a moment outside it refused with that range.
  const points = await until(async () => {
    const answer = await call(client, 'get_database_restore_points', { siteId: site.id, databaseId: database.id });
    return answer.latest ? answer : undefined;
  }, 'the writes to reach the replica');
  const refused = await callError(client, 'restore_database', {
    siteId: site.id,
    databaseId: database.id,
    at: new Date(Date.parse(points.earliest) - 3600_000).toISOString(),
  });
  t.is(refused.code, 'restore_point_unavailable');
  t.deepEqual(
    await call(client, 'get_database_restore_points', { siteId: site.id, databaseId: database.id }).then(
      (again) => again.earliest,
    ),
    points.earliest,
    'a refused restore leaves the history as it was',
  );
  const travelled = await call(client, 'restore_database', {
    siteId: site.id,
    databaseId: database.id,
    at: points.latest,
  });
  t.is(travelled.restoredTo, points.latest);

  // The site's traffic: the three requests this test made of it, one a function call.
  const traffic = await call(client, 'get_site_analytics', { siteId: site.id, step: 'hour' });
  t.like(traffic.totals, { requests: 3, status: { '2xx': 3, '3xx': 0, '4xx': 0, '5xx': 0 }, functionInvocations: 1 });
  t.is(traffic.step, 'hour');

  const raw = (await client.callTool({ name: 'get_site', arguments: { siteId: site.id } })) as {
    content: Array<{ type: string; text: string }>;
  };
  t.is(JSON.parse(raw.content[0]!.text).id, site.id, 'the text content carries the same result');
});

test('a READ key sees only read-only tools and is refused a write tool before it runs', async (t) => {
  const client = await connect(t0.owner.readKey);
  t.teardown(() => client.close());
  const { tools } = await client.listTools();
  t.true(tools.length > 0);
  t.true(tools.every((tool) => tool.annotations?.readOnlyHint === true));
  t.false(tools.some((tool) => tool.name === 'create_site'));
  const refused = await callError(client, 'create_site', { accountId: t0.owner.id, name: 'read-key-refused' });
  t.is(refused.code, 'forbidden');
  // Other tests create sites in this account meanwhile: look for this one by name.
  const { sites } = await call(client, 'list_sites', { accountId: t0.owner.id, limit: 200 });
  t.false(
    sites.some((site: { name: string }) => site.name === 'read-key-refused'),
    'nothing was created',
  );
});

test('text reads stop at 256 KiB and at binary files, with clear errors', async (t) => {
  const client = await connect(t0.owner.writeKey);
  t.teardown(() => client.close());
  const site = await createSite(t0.owner);
  await putFile(t0.owner, site.bucketId, 'data/exact.txt', 'a'.repeat(256 * 1024), 'text/plain');
  await putFile(t0.owner, site.bucketId, 'data/big.txt', 'a'.repeat(256 * 1024 + 1), 'text/plain');
  await putFile(
    t0.owner,
    site.bucketId,
    'data/image.bin',
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0xfe]),
    'application/octet-stream',
  );
  t.is(
    (await call(client, 'read_file', { bucketId: site.bucketId, path: 'data/exact.txt' })).content.length,
    256 * 1024,
  );
  const big = await callError(client, 'read_file', { bucketId: site.bucketId, path: 'data/big.txt' });
  t.is(big.code, 'file_too_large_for_text');
  t.regex(big.message, /262144/);
  t.is(
    (await callError(client, 'read_file', { bucketId: site.bucketId, path: 'data/image.bin' })).code,
    'file_not_text',
  );
});

test('bad input, unknown resources and unknown tools answer the error envelope; no key is a 401', async (t) => {
  const client = await connect(t0.owner.writeKey);
  t.teardown(() => client.close());
  const invalid = await callError(client, 'create_site', { accountId: 'not-a-uuid', name: 'x' });
  t.is(invalid.code, 'invalid_request');
  t.regex(invalid.message, /accountId/);
  t.is((await callError(client, 'get_site', { siteId: crypto.randomUUID() })).code, 'not_found');
  t.is((await callError(client, 'no_such_tool', {})).code, 'unknown_tool');
  const other = await t0.newAccount();
  const theirs = await createSite(other);
  t.is(
    (await callError(client, 'get_site', { siteId: theirs.id })).code,
    'not_found',
    'another account’s site is invisible',
  );

  const anonymous = await got.post(`${t0.url}/mcp`, {
    json: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    throwHttpErrors: false,
    responseType: 'json',
  });
  t.is(anonymous.statusCode, 401);
  t.is((anonymous.body as { error: { code: string } }).error.code, 'unauthorized');
});
