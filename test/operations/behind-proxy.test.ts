// Berth behind Debian's nginx terminating TLS for a wildcard site domain, as docs/deploy.md sets it
// up: hosting, functions and the API answer through it; the links Berth makes use the public URL;
// cookies are Secure; the real client address is what request logs and sign-in limits see, whatever
// a client writes in X-Forwarded-For. And without BERTH_TRUST_PROXY, forwarded headers mean nothing.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import test from 'ava';
import got, { type Got } from 'got';
import { pino } from 'pino';
import { type TestBerth, createSite, json, putFile, startTestBerth } from '../helpers/berth.ts';
import { createUser } from '../../control-plane/services/users.ts';
import { freePort } from '../helpers/ports.ts';
import { type Nginx, startNginx } from '../helpers/nginx.ts';

const DOMAIN = 'example.test';
const PASSWORD = 'a long enough password';

let work: string;
let nginx: Nginx;
let proxyPort: number;
let t0: TestBerth;
const logLines: Array<Record<string, unknown>> = [];

test.before(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-proxy-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${DOMAIN}`,
      '-addext',
      `subjectAltName=DNS:${DOMAIN},DNS:*.${DOMAIN}`,
      '-keyout',
      path.join(work, 'key.pem'),
      '-out',
      path.join(work, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  proxyPort = await freePort();
  // Request logs, as the server writes them, for the client-address checks.
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean))
        logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  t0 = await startTestBerth(
    { siteHost: DOMAIN, publicUrl: `https://${DOMAIN}:${proxyPort}`, trustProxy: true },
    { log: pino({ level: 'info' }, sink) },
  );
  const berthPort = new URL(t0.url).port;
  nginx = await startNginx(
    () => `  server {
    listen 127.0.0.1:${proxyPort} ssl;
    server_name ${DOMAIN} *.${DOMAIN};
    ssl_certificate ${work}/cert.pem;
    ssl_certificate_key ${work}/key.pem;
    client_max_body_size 0;
    location / {
      proxy_pass http://127.0.0.1:${berthPort};
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }`,
    proxyPort,
  );
});

test.after.always(async () => {
  nginx?.stop();
  await t0?.dispose();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** A client of the proxy for `host` (the control plane by default), as a browser on the public URL. */
function via(host = DOMAIN, headers: Record<string, string> = {}): Got {
  return got.extend({
    prefixUrl: `https://127.0.0.1:${proxyPort}`,
    headers: { host: `${host}:${proxyPort}`, ...headers },
    https: { rejectUnauthorized: false },
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
  });
}

test('hosting, functions and the API answer through the proxy, and sites are linked at the public URL', async (t) => {
  const created = await via(DOMAIN, { authorization: `Bearer ${t0.owner.writeKey}` }).post('v0/sites', {
    json: { accountId: t0.owner.id, name: 'Blog', subdomain: 'blog' },
    responseType: 'json',
  });
  t.is(created.statusCode, 201);
  const site = json<{ id: string; bucketId: string; url: string }>(created);
  t.is(site.url, `https://blog.${DOMAIN}:${proxyPort}/`);
  await putFile(t0.owner, site.bucketId, 'web/index.html', '<h1>through nginx</h1>', 'text/html');
  await putFile(
    t0.owner,
    site.bucketId,
    'api/where.ts',
    'export default (req: Request) => Response.json({ url: req.url });',
  );

  const page = await via(`blog.${DOMAIN}`).get('');
  t.is(page.statusCode, 200);
  t.is(page.body, '<h1>through nginx</h1>');
  const fn = await via(`blog.${DOMAIN}`).get('api/where?x=1', { responseType: 'json' });
  t.is(fn.statusCode, 200);
  t.deepEqual(
    fn.body,
    { url: `https://blog.${DOMAIN}:${proxyPort}/api/where?x=1` },
    'the function sees the address the browser used',
  );
  const account = await via(DOMAIN, { authorization: `Bearer ${t0.owner.readKey}` }).get('v0/accounts/current', {
    responseType: 'json',
  });
  t.is(json<{ id: string }>(account).id, t0.owner.id);
});

test('links Berth makes use the public URL: the gate, sign-in, invitations, CLI login, export downloads', async (t) => {
  const site = await createSite(t0.owner, { access: 'PRIVATE', subdomain: 'members' });
  await putFile(t0.owner, site.bucketId, 'web/index.html', '<p>private</p>', 'text/html');
  const gate = await via(`members.${DOMAIN}`).get('');
  t.is(gate.statusCode, 401);
  t.regex(gate.body, new RegExp(`href="https://${DOMAIN.replace('.', '\\.')}:${proxyPort}/login\\?site=${site.id}`));

  await createUser(t0.berth.deps, {
    email: 'admin@example.test',
    accountId: t0.owner.id,
    role: 'ADMIN',
    password: PASSWORD,
  });
  const signedIn = await via().post('login', {
    form: { email: 'admin@example.test', password: PASSWORD, site: site.id, next: '/' },
  });
  t.is(signedIn.statusCode, 303);
  t.true(signedIn.headers.location!.startsWith(`https://members.${DOMAIN}:${proxyPort}/_berth/session?token=`));
  const cookie = (signedIn.headers['set-cookie'] as string[]).find((c) => c.startsWith('__Host-berth_console='))!;
  t.regex(cookie, /;\s*secure/i, 'the session cookie is Secure behind https');

  const session = cookie.split(';')[0]!;
  const { csrfToken } = JSON.parse((await via(DOMAIN, { cookie: session }).get('session')).body) as {
    csrfToken: string;
  };
  const asUser = via(DOMAIN, { cookie: session, 'x-csrf-token': csrfToken });
  const invitation = json<{ url: string }>(
    await asUser.post('v0/invitations', {
      json: { email: 'friend@example.test', role: 'MEMBER' },
      responseType: 'json',
    }),
  );
  t.true(invitation.url.startsWith(`https://${DOMAIN}:${proxyPort}/invite?token=`));
  const cliLogin = json<{ approveUrl: string }>(
    await via().post('cli-login', { json: { machine: 'laptop' }, responseType: 'json' }),
  );
  t.true(cliLogin.approveUrl.startsWith(`https://${DOMAIN}:${proxyPort}/#/cli-login/`));

  const api = via(DOMAIN, { authorization: `Bearer ${t0.owner.writeKey}` });
  const database = json<{ database: { id: string } }>(
    await api.post(`v0/sites/${site.id}/databases`, { responseType: 'json' }),
  ).database;
  const base = `v0/sites/${site.id}/databases/${database.id}`;
  let record = json<{ export: { id: string; status: string; downloadUrl?: string } }>(
    await api.post(`${base}/exports`, { responseType: 'json' }),
  ).export;
  for (let i = 0; i < 100 && record.status === 'PROCESSING'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    record = json<{ export: typeof record }>(
      await api.post(`${base}/exports/${record.id}/reconcile`, { responseType: 'json' }),
    ).export;
  }
  t.is(record.status, 'COMPLETE');
  const link = new URL(record.downloadUrl!);
  t.is(link.origin, `https://${DOMAIN}:${proxyPort}`);
  const download = await via().get(`${link.pathname.slice(1)}${link.search}`);
  t.is(download.statusCode, 200, 'the link works through the proxy');
});

test('request logs and sign-in limits see the client address the proxy reports, not one a client forges', async (t) => {
  const forged = await via(DOMAIN, { 'x-forwarded-for': '203.0.113.9' }).get('v0/openapi.json');
  t.is(forged.statusCode, 200);
  const requestId = String(forged.headers['berth-request-id']);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const line = logLines.find((l) => l.reqId === requestId);
  t.is(line?.ip, '127.0.0.1', 'the address nginx saw, not the forged one');

  // 20 failures per address in 15 minutes, each from a different forged address and email: still one address.
  for (let i = 0; i < 20; i++) {
    const res = await via(DOMAIN, { 'x-forwarded-for': `198.51.100.${i}` }).post('login', {
      json: { email: `nobody${i}@example.test`, password: 'wrong password' },
    });
    t.is(res.statusCode, 401);
  }
  const limited = await via(DOMAIN, { 'x-forwarded-for': '198.51.100.200' }).post('login', {
    json: { email: 'someone@example.test', password: 'wrong password' },
  });
  t.is(limited.statusCode, 429);
  t.truthy(limited.headers['retry-after']);
});

test('without BERTH_TRUST_PROXY, forwarded headers change neither links, cookies nor addresses', async (t) => {
  const direct = await startTestBerth();
  t.teardown(() => direct.dispose());
  await createUser(direct.berth.deps, {
    email: 'plain@example.test',
    accountId: direct.owner.id,
    role: 'ADMIN',
    password: PASSWORD,
  });
  const forwarded = {
    'x-forwarded-proto': 'https',
    'x-forwarded-host': 'evil.example',
    'x-forwarded-for': '203.0.113.9',
  };
  // A name that is not loopback, where only https would make the cookie Secure (and __Host-).
  const signedIn = await got.post(`${direct.url}/login`, {
    headers: { ...forwarded, host: `berth.example.test:${direct.berth.port}` },
    json: { email: 'plain@example.test', password: PASSWORD },
    throwHttpErrors: false,
  });
  t.is(signedIn.statusCode, 200);
  const cookie = (signedIn.headers['set-cookie'] as string[]).find((c) => c.startsWith('berth_console='))!;
  t.notRegex(cookie, /secure/i);
  const started = await got.post(`${direct.url}/cli-login`, {
    headers: forwarded,
    json: { machine: 'x' },
    throwHttpErrors: false,
    responseType: 'json',
  });
  t.true(json<{ approveUrl: string }>(started).approveUrl.startsWith(`${direct.url}/#/cli-login/`));
});
