// The `berth` commands generated from the operation catalogue, and `berth mcp` over stdio, run as a user
// runs them: child processes pointed at a real server by BERTH_URL and BERTH_API_KEY.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type TestBerth, startTestBerth } from './helpers/berth.ts';
import { MCP_TOOL_NAMES } from '../control-plane/mcp/tools.ts';
import { resolveDenoBinary } from '../runtime-host/deno-binary.ts';

const BIN = path.resolve(import.meta.dirname, '../control-plane/cli/berth.js');

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

const env = (key = t0.owner.writeKey) => ({
  ...process.env,
  BERTH_URL: t0.url,
  BERTH_API_KEY: key,
  BERTH_CONFIG_DIR: path.join(os.tmpdir(), 'berth-no-login'),
});

async function berth(args: string[], key?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [BIN, ...args], { env: env(key) });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const answer = <T = Record<string, any>>(run: { stdout: string }) => JSON.parse(run.stdout) as T;

test('whoami, sites, files, secrets and db commands come from the catalogue and speak REST', async (t) => {
  const me = await berth(['whoami', '--json']);
  t.is(me.code, 0, me.stderr);
  t.is(answer(me).id, t0.owner.id);

  const created = await berth(['sites', 'create', 'CLI site', '--subdomain', 'cli-catalogue', '--json']);
  t.is(created.code, 0, created.stderr);
  t.like(answer(created), { name: 'CLI site', subdomain: 'cli-catalogue', status: 'ACTIVE' });
  t.is(answer(await berth(['sites', 'get', '--site', 'cli-catalogue', '--json'])).subdomain, 'cli-catalogue');
  t.like(answer(await berth(['sites', 'update', '--site', 'cli-catalogue', '--name', 'Renamed', '--json'])), {
    name: 'Renamed',
  });
  t.like(answer(await berth(['sites', 'archive', '--site', 'cli-catalogue', '--json'])), { status: 'ARCHIVED' });
  t.like(answer(await berth(['sites', 'activate', '--site', 'cli-catalogue', '--json'])), { status: 'ACTIVE' });
  const listed = await berth(['sites', 'ls']);
  t.regex(listed.stdout, /cli-catalogue/, 'a person gets a table');

  const local = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'berth-cli-')), 'page.html');
  t.teardown(() => fs.rm(path.dirname(local), { recursive: true, force: true }));
  await fs.writeFile(local, '<p>from the cli</p>');
  const put = await berth(['files', 'put', local, 'web/index.html', '--site', 'cli-catalogue', '--json']);
  t.is(put.code, 0, put.stderr);
  t.like(answer(put), { path: 'web/index.html', contentType: 'text/html; charset=utf-8' });
  t.is((await t0.site('cli-catalogue').get('')).body, '<p>from the cli</p>');
  t.is((await berth(['files', 'get', 'web/index.html', '--site', 'cli-catalogue'])).stdout, '<p>from the cli</p>');
  const files = answer<{ files: Array<{ path: string; id: string; currentVersionId: string }> }>(
    await berth(['files', 'ls', '--site', 'cli-catalogue', '--prefix', 'web/', '--json']),
  ).files;
  t.deepEqual(
    files.map((f) => f.path),
    ['web/index.html'],
  );
  const versions = answer<{ versions: Array<{ id: string }> }>(
    await berth(['files', 'versions', files[0]!.id, '--json']),
  ).versions;
  t.is(versions.length, 1);
  t.like(answer(await berth(['files', 'rm', 'web/index.html', '--site', 'cli-catalogue', '--json'])), {
    path: 'web/index.html',
  });
  const restored = await berth([
    'files',
    'restore',
    files[0]!.id,
    versions[0]!.id,
    '--current-version-id',
    'null',
    '--json',
  ]);
  t.is(restored.code, 0, `${restored.stderr}${restored.stdout}`);

  await t0.owner.api.post(`v0/sites/${answer(created).id}/secrets`, { json: { name: 'TOKEN', value: 'v' } });
  t.deepEqual(
    answer<{ secrets: Array<{ name: string }> }>(
      await berth(['secrets', 'ls', '--site', 'cli-catalogue', '--json']),
    ).secrets.map((s) => s.name),
    ['TOKEN'],
  );
  t.like(answer(await berth(['secrets', 'get', 'TOKEN', '--site', 'cli-catalogue', '--json'])).secret, { value: 'v' });
  t.like(answer(await berth(['secrets', 'rm', 'TOKEN', '--site', 'cli-catalogue', '--json'])), { deleted: true });

  t.is((await berth(['db', 'create', '--site', 'cli-catalogue'])).code, 0);
  t.is((await berth(['db', 'query', 'CREATE TABLE notes (body TEXT)', '--site', 'cli-catalogue'])).code, 0);
  t.is(
    (await berth(['db', 'query', 'INSERT INTO notes VALUES (?)', '--params', '["hi"]', '--site', 'cli-catalogue']))
      .code,
    0,
  );
  const rows = await berth(['db', 'query', 'SELECT body FROM notes', '--site', 'cli-catalogue']);
  t.regex(rows.stdout, /body\s*\nhi/);
  const failed = await berth(['db', 'query', 'SELECT * FROM missing', '--site', 'cli-catalogue']);
  t.is(failed.code, 1, 'a refused statement fails the command');
  t.regex(failed.stdout, /no such table/);
});

test('generated commands report API errors and usage errors with exit codes, never a stack', async (t) => {
  const invalid = await berth(['sites', 'create', 'x', '--subdomain', 'NO']);
  t.is(invalid.code, 1);
  t.regex(invalid.stderr, /subdomain.*\(invalid_request\)/);
  const readOnly = await berth(['sites', 'create', 'y'], t0.owner.readKey);
  t.is(readOnly.code, 1);
  t.regex(readOnly.stderr, /forbidden/);
  const unknown = await berth(['sites', 'get', '--site', 'no-such-site']);
  t.is(unknown.code, 1);
  for (const run of [invalid, readOnly, unknown]) t.false(/\n\s+at /.test(run.stderr), 'no stack trace');
  const help = await berth(['sites', 'create', '--help']);
  t.is(help.code, 0);
  t.regex(help.stdout, /Create a site/);
  t.regex(help.stdout, /Examples:/);
});

test('berth init writes the runtime contract’s types for editors, and the scaffolded function checks against them', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-init-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  t.is((await berth(['init', path.join(dir, 'project')])).code, 0);
  const types = await fs.readFile(path.join(dir, 'project', 'berth.d.ts'), 'utf8');
  t.regex(types, /interface BerthContext/);
  t.regex(
    await fs.readFile(path.join(dir, 'project', 'api', 'hello.ts'), 'utf8'),
    /<reference path="..\/berth.d.ts" \/>/,
  );
  const deno = resolveDenoBinary();
  const check = await promisify(execFile)(
    deno,
    ['check', '--no-config', '--quiet', path.join(dir, 'project', 'api', 'hello.ts')],
    { env: { ...process.env, NO_COLOR: '1' } },
  ).then(
    () => 0,
    (err: { code: number }) => err.code,
  );
  t.is(check, 0, 'deno check passes with the generated types');
});

test('berth init makes two functions sharing a module of lib/ and a deno.json, and deno check type-checks the project with it', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-init-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const project = path.join(dir, 'project');
  const init = await berth(['init', project, '--json']);
  t.is(init.code, 0, init.stderr);
  t.deepEqual((JSON.parse(init.stdout) as { files: string[] }).files, [
    'README.md',
    'api/goodbye.ts',
    'api/hello.ts',
    'berth.d.ts',
    'deno.json',
    'lib/greeting.ts',
    'migrations/0001_init.sql',
    'web/index.html',
  ]);
  for (const fn of ['api/hello.ts', 'api/goodbye.ts'])
    t.regex(
      await fs.readFile(path.join(project, fn), 'utf8'),
      /^import \{ nameToGreet \} from '\.\.\/lib\/greeting\.ts';$/m,
    );
  const config = JSON.parse(await fs.readFile(path.join(project, 'deno.json'), 'utf8')) as Record<string, unknown>;
  t.deepEqual(config.imports, {});

  // A module of lib/ that uses ctx's types checks with no reference of its own: deno.json gives them.
  await fs.writeFile(
    path.join(project, 'lib/site.ts'),
    'export const siteOf = (ctx: BerthContext): string => ctx.siteId;\n',
  );
  const check = (args: string[]) =>
    promisify(execFile)(resolveDenoBinary(), ['check', '--quiet', ...args], {
      cwd: project,
      env: { ...process.env, NO_COLOR: '1' },
    }).then(
      () => 0,
      (err: { code: number }) => err.code,
    );
  t.is(await check(['lib/site.ts']), 0, 'deno check of one module, with deno.json');
  t.is(await check([]), 0, 'deno check of the whole project');
  await fs.writeFile(
    path.join(project, 'lib/site.ts'),
    'export const siteOf = (ctx: BerthContext): number => ctx.siteId;\n',
  );
  t.is(await check([]), 1, 'a type error is found');
});

test('berth mcp serves the same tools over stdio, with the key’s permission', async (t) => {
  const client = new Client({ name: 'berth-test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp'],
      env: env() as Record<string, string>,
      stderr: 'pipe',
    }),
  );
  t.teardown(() => client.close());
  const { tools } = await client.listTools();
  t.deepEqual(tools.map((tool) => tool.name).sort(), [...MCP_TOOL_NAMES].sort());
  const result = (await client.callTool({ name: 'list_sites', arguments: { accountId: t0.owner.id } })) as unknown as {
    structuredContent: { sites: unknown[] };
  };
  t.true(Array.isArray(result.structuredContent.sites));

  const reader = new Client({ name: 'berth-test', version: '1.0.0' });
  await reader.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp'],
      env: env(t0.owner.readKey) as Record<string, string>,
      stderr: 'pipe',
    }),
  );
  t.teardown(() => reader.close());
  const readTools = (await reader.listTools()).tools;
  t.true(readTools.every((tool) => tool.annotations?.readOnlyHint === true));
  const refused = (await reader.callTool({
    name: 'create_site',
    arguments: { accountId: t0.owner.id, name: 'nope' },
  })) as unknown as { isError: boolean; structuredContent: { error: { code: string } } };
  t.true(refused.isError);
  t.is(refused.structuredContent.error.code, 'forbidden');
});
