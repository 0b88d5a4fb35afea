// `berth login` and `berth logout` against a real server: the CLI shows a code, a signed-in user
// approves it through the dashboard's endpoint, the CLI collects the key and stores it for the other
// commands; a request expires after 10 minutes and is approved once; logout revokes the key.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import got, { type Got } from 'got';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type TestBerth, apiClient, json, startTestBerth } from './helpers/berth.ts';
import { createUser } from '../control-plane/services/users.ts';
import { freePort } from './helpers/ports.ts';
import { until } from './helpers/until.ts';

const BIN = path.resolve(import.meta.dirname, '../control-plane/cli/berth.js');
const PASSWORD = 'a long enough password';
const EMAIL = 'cli-login@example.com';
const CODE = /\b([A-Z2-9]{4}-[A-Z2-9]{4})\b/;

let t0: TestBerth;
let scratch: string;
/** How far the server's clock is ahead of the real one: the expiry test moves it. */
let skew = 0;
let dashboard: Got;

/** A signed-in user's requests, as the dashboard makes them: the session cookie, its CSRF token, the account. */
async function signIn(): Promise<Got> {
  const http = got.extend({ prefixUrl: t0.url, throwHttpErrors: false, followRedirect: false, retry: { limit: 0 } });
  const signedIn = await http.post('login', { json: { email: EMAIL, password: PASSWORD } });
  const cookie = (signedIn.headers['set-cookie'] ?? []).find((c) => c.startsWith('__Host-berth_console='));
  if (!cookie) throw new Error(`sign-in failed: ${signedIn.statusCode} ${signedIn.body}`);
  const token = cookie.split(';')[0]!;
  const session = await http.get('session', { headers: { cookie: token }, responseType: 'json' });
  const { csrfToken } = session.body as { csrfToken: string };
  return http.extend({
    responseType: 'json',
    headers: { cookie: token, 'x-csrf-token': csrfToken, 'berth-account': t0.owner.id },
  });
}

test.before(async () => {
  t0 = await startTestBerth({}, { now: () => new Date(Date.now() + skew) });
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-cli-login-'));
  await createUser(t0.berth.deps, { email: EMAIL, accountId: t0.owner.id, role: 'ADMIN', password: PASSWORD });
  dashboard = await signIn();
});
test.after.always(async () => {
  await t0?.dispose();
  if (scratch) await fs.rm(scratch, { recursive: true, force: true });
});

/** A `berth` folder of its own for each test, not made yet: the CLI makes it. */
const newConfigDir = async () => path.join(await fs.mkdtemp(path.join(scratch, 'config-')), 'berth');

/** A user's environment with no key and no server set: only the stored login says where to go. */
const cliEnv = (configDir: string, extra: Record<string, string> = {}) => ({
  BERTH_CONFIG_DIR: configDir,
  BERTH_URL: '',
  BERTH_API_KEY: '',
  XDG_CACHE_HOME: path.join(scratch, 'cache'),
  DISPLAY: '',
  WAYLAND_DISPLAY: '',
  ...extra,
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const run: Run = { code: null, stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (run.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (run.stderr += chunk.toString()));
  const exited = new Promise<Run>((resolve) =>
    child.once('close', (code) => {
      run.code = code;
      resolve({ ...run });
    }),
  );
  return { child, run, exited };
}

const berth = (args: string[], env: Record<string, string>) => start(args, env).exited;

/** Starts `berth login` and reads the code it shows. */
async function startLogin(configDir: string, extra: string[] = []) {
  const login = start(['login', '--url', t0.url, '--no-browser', ...extra], cliEnv(configDir));
  const code = await until(() => {
    const shown = login.run.stdout.match(CODE)?.[1];
    if (!shown && login.run.code !== null) throw new Error(`berth login showed no code: ${login.run.stderr}`);
    return shown;
  }, 'the login code');
  return { ...login, code };
}

const approve = (code: string, permission: 'READ' | 'WRITE') =>
  dashboard.post(`v0/cli-logins/${code}/approve`, { json: { permission } });

/** A whole login: started by the CLI, approved in the dashboard, collected. */
async function logIn(configDir: string, permission: 'READ' | 'WRITE', extra: string[] = []) {
  const login = await startLogin(configDir, extra);
  const approved = await approve(login.code, permission);
  if (approved.statusCode !== 200)
    throw new Error(`approval failed: ${approved.statusCode} ${JSON.stringify(approved.body)}`);
  return { loginCode: login.code, ...(await login.exited) };
}

interface Stored {
  url: string;
  key: string;
  keyId: string;
  accountId: string;
  permission: string;
  createdAt: string;
}

const readStored = async (configDir: string) =>
  JSON.parse(await fs.readFile(path.join(configDir, 'credentials.json'), 'utf8')) as Stored;
const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

// Serial tests run before the others: this one moves the server's clock past every pending request.
test.serial(
  'a request not approved within 10 minutes expires: the CLI says so and exits 1, and it can no longer be approved',
  async (t) => {
    const dir = await newConfigDir();
    const login = await startLogin(dir);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    t.is(login.run.code, null, 'still waiting after a PENDING answer');
    skew += 10 * 60_000 + 1000;
    const done = await login.exited;
    t.is(done.code, 1, done.stderr);
    t.regex(done.stderr, /expired/);
    t.regex(done.stderr, /\(login_expired\)/);
    t.regex(done.stderr, /berth login/);
    t.false(await exists(path.join(dir, 'credentials.json')));

    const late = await approve(login.code, 'WRITE');
    t.is(late.statusCode, 410);
    t.is(json(late).error.code, 'login_expired');
    const shown = await dashboard.get(`v0/cli-logins/${login.code}`);
    t.is(json<{ login: { status: string } }>(shown).login.status, 'EXPIRED');
  },
);

test('a login approved in the dashboard stores a key only the user can read, and the other commands use it', async (t) => {
  const dir = await newConfigDir();
  const login = await startLogin(dir);
  t.regex(
    login.run.stdout,
    new RegExp(
      `Open ${t0.url.replace(/[.]/g, '\\.')}/#/cli-login/${login.code} and check that it shows the code ${login.code}`,
    ),
  );

  // The dashboard shows the request behind the code, with the same code and the machine's name.
  const shown = await dashboard.get(`v0/cli-logins/${login.code}`);
  t.is(shown.statusCode, 200);
  t.like(json<object>(shown), { login: { code: login.code, status: 'PENDING', machine: os.hostname() } });

  const approved = await approve(login.code, 'WRITE');
  t.is(approved.statusCode, 200, JSON.stringify(approved.body));
  t.like(json<object>(approved), { login: { code: login.code, status: 'APPROVED' } });
  const done = await login.exited;
  t.is(done.code, 0, done.stderr);
  t.regex(
    done.stdout,
    new RegExp(`Logged in to ${t0.url.replace(/[.]/g, '\\.')}: account .*${t0.owner.id}.*, with a WRITE key`),
  );
  t.notRegex(done.stdout + done.stderr, /berth_[A-Za-z0-9_-]{20,}/, 'the key itself is never printed');

  const file = path.join(dir, 'credentials.json');
  t.is((await fs.stat(dir)).mode & 0o777, 0o700);
  t.is((await fs.stat(file)).mode & 0o777, 0o600);
  t.deepEqual(await fs.readdir(dir), ['credentials.json'], 'no temp file is left behind');
  const stored = await readStored(dir);
  t.like(stored, { url: t0.url, accountId: t0.owner.id, permission: 'WRITE' });
  t.regex(stored.key, /^berth_/);
  t.is((await apiClient(t0.url, stored.key).get('v0/accounts/current')).statusCode, 200);

  // Once the CLI has collected it, the request cannot be approved again nor collected again.
  const again = await approve(login.code, 'WRITE');
  t.is(again.statusCode, 409);
  t.is(json(again).error.code, 'login_already_approved');
  t.is(
    json<{ login: { status: string } }>(await dashboard.get(`v0/cli-logins/${login.code}`)).login.status,
    'COLLECTED',
  );

  // No BERTH_API_KEY, no BERTH_URL: the stored login is enough.
  const me = await berth(['whoami', '--json'], cliEnv(dir));
  t.is(me.code, 0, me.stderr);
  t.is(JSON.parse(me.stdout).id, t0.owner.id);
  const created = await berth(['sites', 'create', 'Made with a CLI login', '--json'], cliEnv(dir));
  t.is(created.code, 0, created.stderr);
  const listed = await berth(['sites', 'ls', '--json'], cliEnv(dir));
  t.is(listed.code, 0, listed.stderr);
  t.true(
    (JSON.parse(listed.stdout).sites as Array<{ id: string }>).some((s) => s.id === JSON.parse(created.stdout).id),
  );
});

test('a request is approved once; the key is handed to the poll token once, then 410', async (t) => {
  const started = await t0.anonymous.post('cli-login', { json: { machine: 'laptop' } });
  t.is(started.statusCode, 201);
  const { login, pollToken, approveUrl } = json<{
    login: { code: string; expiresAt: string };
    pollToken: string;
    approveUrl: string;
  }>(started);
  t.regex(login.code, /^[A-Z2-9]{4}-[A-Z2-9]{4}$/);
  t.is(approveUrl, `${t0.url}/#/cli-login/${login.code}`);
  t.is(Date.parse(login.expiresAt) - (Date.now() + skew) > 9 * 60_000, true, 'valid for 10 minutes');

  const pending = await t0.anonymous.post('cli-login/poll', { json: { pollToken } });
  t.is(pending.statusCode, 202);
  t.deepEqual(pending.body, { status: 'PENDING' });

  t.is((await approve(login.code, 'READ')).statusCode, 200);
  const twice = await approve(login.code, 'WRITE');
  t.is(twice.statusCode, 409);
  t.is(json(twice).error.code, 'login_already_approved');

  const collected = await t0.anonymous.post('cli-login/poll', { json: { pollToken } });
  t.is(collected.statusCode, 200);
  t.like(json<object>(collected), { status: 'APPROVED', accountId: t0.owner.id, permission: 'READ' });
  const again = await t0.anonymous.post('cli-login/poll', { json: { pollToken } });
  t.is(again.statusCode, 410);
  t.is(json(again).error.code, 'login_expired');
  t.is((await t0.anonymous.post('cli-login/poll', { json: { pollToken: 'not a token' } })).statusCode, 410);
});

test('a READ approval gives a READ key: reads work, writes are refused, berth mcp shows only the read-only tools', async (t) => {
  const dir = await newConfigDir();
  const done = await logIn(dir, 'READ', ['--json']);
  t.is(done.code, 0, done.stderr);
  const [first, last] = done.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  t.is(first.login.code, done.loginCode, 'the code comes first');
  t.is(first.approveUrl, `${t0.url}/#/cli-login/${first.login.code}`);
  t.like(last, {
    url: t0.url,
    accountId: t0.owner.id,
    permission: 'READ',
    credentials: path.join(dir, 'credentials.json'),
  });
  t.is(last.key, undefined, 'the key itself is never printed');
  t.is((await readStored(dir)).permission, 'READ');

  const me = await berth(['whoami'], cliEnv(dir));
  t.is(me.code, 0, me.stderr);
  const refused = await berth(['sites', 'create', 'Not with a READ key'], cliEnv(dir));
  t.is(refused.code, 1);
  t.regex(refused.stderr, /\(forbidden\)/);
  const key = (await readStored(dir)).key;
  const write = await apiClient(t0.url, key).post('v0/sites', { json: { accountId: t0.owner.id, name: 'nope' } });
  t.is(write.statusCode, 403);
  t.is(json(write).error.code, 'forbidden');

  const client = new Client({ name: 'berth-test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp'],
      env: { ...process.env, ...cliEnv(dir) } as Record<string, string>,
      stderr: 'pipe',
    }),
  );
  t.teardown(() => client.close());
  const { tools } = await client.listTools();
  t.true(tools.length > 0);
  t.true(tools.every((tool) => tool.annotations?.readOnlyHint === true));
});

test('berth logout revokes the key on the server and deletes the file', async (t) => {
  const dir = await newConfigDir();
  t.is((await logIn(dir, 'WRITE')).code, 0);
  const { key, keyId } = await readStored(dir);
  t.is((await apiClient(t0.url, key).get('v0/accounts/current')).statusCode, 200);

  const out = await berth(['logout'], cliEnv(dir));
  t.is(out.code, 0, out.stderr);
  t.regex(out.stdout, new RegExp(`key ${keyId} revoked`));
  t.false(await exists(path.join(dir, 'credentials.json')));
  const after = await apiClient(t0.url, key).get('v0/accounts/current');
  t.is(after.statusCode, 401);
  t.is(json(after).error.code, 'unauthorized');

  const none = await berth(['logout', '--json'], cliEnv(dir));
  t.is(none.code, 0, none.stderr);
  t.like(JSON.parse(none.stdout), { loggedOut: false });
  const noKey = await berth(['whoami'], cliEnv(dir));
  t.is(noKey.code, 3);
  t.regex(noKey.stderr, /no stored login/);
  t.regex(noKey.stderr, /berth login/);
});

test('logout forgets a key the server no longer knows; a server that cannot be reached keeps it unless --force', async (t) => {
  const dir = await newConfigDir();
  t.is((await logIn(dir, 'WRITE')).code, 0);
  const stored = await readStored(dir);
  // Revoked already, here by the key itself.
  t.is(
    (await t0.anonymous.post('cli-login/revoke', { headers: { authorization: `Bearer ${stored.key}` } })).statusCode,
    200,
  );
  const forgotten = await berth(['logout', '--json'], cliEnv(dir));
  t.is(forgotten.code, 0, forgotten.stderr);
  t.like(JSON.parse(forgotten.stdout), { loggedOut: true, revoked: false, keyId: stored.keyId });
  t.false(await exists(path.join(dir, 'credentials.json')));

  // A login stored for a server that is not running.
  const closed = `http://127.0.0.1:${await freePort()}`;
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  await fs.writeFile(path.join(dir, 'credentials.json'), JSON.stringify({ ...stored, url: closed }), { mode: 0o600 });
  const kept = await berth(['logout'], cliEnv(dir));
  t.is(kept.code, 3);
  t.regex(kept.stderr, /cannot reach Berth/);
  t.regex(kept.stderr, /--force/);
  t.true(await exists(path.join(dir, 'credentials.json')));
  const forced = await berth(['logout', '--force'], cliEnv(dir));
  t.is(forced.code, 0, forced.stderr);
  t.regex(forced.stdout, /not revoked/);
  t.false(await exists(path.join(dir, 'credentials.json')));
});

test('BERTH_API_KEY wins over the stored login, and the stored key is not sent to another BERTH_URL', async (t) => {
  const dir = await newConfigDir();
  t.is((await logIn(dir, 'READ')).code, 0);

  const envKey = await berth(
    ['whoami', '--json'],
    cliEnv(dir, { BERTH_URL: t0.url, BERTH_API_KEY: 'berth_not-a-key' }),
  );
  t.is(envKey.code, 3);
  t.regex(envKey.stdout + envKey.stderr, /unauthorized/);

  const sameUrl = await berth(['whoami'], cliEnv(dir, { BERTH_URL: `${t0.url}/` }));
  t.is(sameUrl.code, 0, sameUrl.stderr);
  const otherUrl = await berth(['whoami'], cliEnv(dir, { BERTH_URL: 'http://127.0.0.1:1' }));
  t.is(otherUrl.code, 3);
  t.regex(otherUrl.stderr, /stored login is for/);
  t.regex(otherUrl.stderr, /berth login --url http:\/\/127\.0\.0\.1:1/);
});

test('a new login replaces the stored one and revokes its key', async (t) => {
  const dir = await newConfigDir();
  t.is((await logIn(dir, 'READ')).code, 0);
  const first = await readStored(dir);
  const second = await logIn(dir, 'WRITE');
  t.is(second.code, 0, second.stderr);
  t.regex(second.stderr, new RegExp(`Revoked the key of the previous login \\(${first.keyId}\\)`));
  const stored = await readStored(dir);
  t.is(stored.permission, 'WRITE');
  t.not(stored.keyId, first.keyId);
  t.is((await apiClient(t0.url, first.key).get('v0/accounts/current')).statusCode, 401);
  t.is((await apiClient(t0.url, stored.key).get('v0/accounts/current')).statusCode, 200);
});
