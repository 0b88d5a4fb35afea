// Preview hosts through real HTTP, read by a signed-in member of the account (who may see them:
// site-past.test.ts has the strangers): `<short id>--<subdomain>` serves a deployment as it would be live
// (an uploading one over the site's current files, with prune; a published one as the site was right
// after it, whatever came later), `t<unix ms>--<subdomain>` a snapshot's instant; every answer says
// noindex; a preview asks strangers to sign in and comes back to the preview host; unknown,
// failed and other sites' labels show nothing; preview functions run beside the live ones.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import got from 'got';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { type Deployment, createDeployment as create, deployFiles as deploy } from './helpers/deployments.ts';
import { memberCookie, memberOf } from './helpers/site-member.ts';
import { createUser } from '../control-plane/services/users.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type Account = TestBerth['owner'];

type Site = Awaited<ReturnType<typeof createSite>>;

const FN = (text: string) => `export default () => new Response('${text}');\n`;
async function publish(account: Account, siteId: string, deployment: Deployment) {
  return account.api.post(`v0/sites/${siteId}/deployments/${deployment.id}/publish`);
}

/** The preview host as a member of the site's account reads it. */
const previewOf = (label: string, site: Site) => memberOf(t0, t0.owner.id, site.id, `${label}--${site.subdomain}`);

test('an uploading deployment is served at its preview host, pages and functions, while the live site stays as it is', async (t) => {
  const site = await createSite(t0.owner);
  await deploy(t0.owner, site.id, { 'web/index.html': '<p>live</p>', 'api/hello.ts': FN('live hello') });
  const next = await create(t0.owner, site.id, {
    'web/index.html': '<p>next</p>',
    'web/new.html': '<p>new page</p>',
    'api/hello.ts': FN('next hello'),
  });
  t.is(next.status, 'UPLOADING');
  t.regex(next.previewUrl, new RegExp(`^http://${next.shortId}--${site.subdomain}\\.localhost:\\d+/$`));
  const preview = await previewOf(next.shortId, site);

  const page = await preview.get('');
  t.is(page.statusCode, 200);
  t.is(page.body, '<p>next</p>');
  t.is(page.headers['x-robots-tag'], 'noindex');
  t.is((await preview.get('new.html')).body, '<p>new page</p>');
  const fn = await preview.get('api/hello');
  t.is(fn.body, 'next hello');
  t.is(fn.headers['x-robots-tag'], 'noindex');

  const live = t0.site(site.subdomain);
  const livePage = await live.get('');
  t.is(livePage.body, '<p>live</p>');
  t.is(livePage.headers['x-robots-tag'], undefined, 'the live site is indexable');
  t.is((await live.get('new.html')).statusCode, 404);
  t.is((await live.get('api/hello')).body, 'live hello');
  t.is((await preview.get('api/hello')).body, 'next hello', 'the preview’s worker is its own');

  // A file declared by digest and not uploaded yet answers 404 at its path; the rest is served.
  const partial = await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
    json: {
      files: [
        { path: 'web/index.html', content: '<p>partial</p>', contentType: 'text/html' },
        { path: 'web/big.bin', sha256: 'ab'.repeat(32), size: 10, contentType: 'application/octet-stream' },
      ],
    },
  });
  const partialDeployment = json<{ deployment: Deployment }>(partial).deployment;
  t.deepEqual(partialDeployment.missing, ['ab'.repeat(32)]);
  const partialPreview = await previewOf(partialDeployment.shortId, site);
  t.is((await partialPreview.get('')).body, '<p>partial</p>');
  t.is((await partialPreview.get('big.bin')).statusCode, 404);
});

test('a published deployment’s preview keeps showing it after later deployments change the live site', async (t) => {
  const site = await createSite(t0.owner);
  const first = await deploy(t0.owner, site.id, { 'web/index.html': '<p>one</p>', 'api/v.ts': FN('one') });
  await deploy(t0.owner, site.id, { 'web/index.html': '<p>two</p>', 'web/extra.html': 'x', 'api/v.ts': FN('two') });
  await putFile(t0.owner, site.bucketId, 'web/index.html', '<p>three</p>', 'text/html');

  t.is((await t0.site(site.subdomain).get('')).body, '<p>three</p>');
  t.is((await t0.site(site.subdomain).get('api/v')).body, 'two');
  const preview = await previewOf(first.shortId, site);
  t.is((await preview.get('')).body, '<p>one</p>');
  t.is((await preview.get('extra.html')).statusCode, 404, 'what came later is not in it');
  t.is((await preview.get('api/v')).body, 'one');
  const head = await preview.head('');
  t.is(head.statusCode, 200);
  t.is(head.headers.etag, `"${(await import('node:crypto')).createHash('sha256').update('<p>one</p>').digest('hex')}"`);
});

test('an unpublished preview with prune shows only its set under web/ and api/; without, the site’s other files', async (t) => {
  const site = await createSite(t0.owner);
  await deploy(t0.owner, site.id, {
    'web/index.html': '<p>live index</p>',
    'web/other.html': '<p>live other</p>',
    'api/kept.ts': FN('kept'),
  });
  const pruned = await create(t0.owner, site.id, { 'web/index.html': '<p>pruned index</p>' }, true);
  const kept = await create(t0.owner, site.id, { 'web/index.html': '<p>kept index</p>' }, false);

  const p = await previewOf(pruned.shortId, site);
  t.is((await p.get('')).body, '<p>pruned index</p>');
  t.is((await p.get('other.html')).statusCode, 404);
  const gone = await p.get('api/kept');
  t.is(gone.statusCode, 404);
  t.is(JSON.parse(gone.body).error.code, 'function_not_found');

  const k = await previewOf(kept.shortId, site);
  t.is((await k.get('')).body, '<p>kept index</p>');
  t.is((await k.get('other.html')).body, '<p>live other</p>');
  t.is((await k.get('api/kept')).body, 'kept');

  // The site's current files are read at each request: a write shows in the unpruned preview at once.
  await putFile(t0.owner, site.bucketId, 'web/other.html', '<p>written later</p>', 'text/html');
  t.is((await k.get('other.html')).body, '<p>written later</p>');
});

test('labels that show nothing answer the no-site page to members, noindex included; a preview never shows another site', async (t) => {
  const site = await createSite(t0.owner);
  const other = await createSite(t0.owner);
  const shown = await deploy(t0.owner, site.id, { 'web/index.html': '<p>site</p>' });
  const otherDeployment = await create(t0.owner, other.id, { 'web/index.html': '<p>other’s</p>' });
  // A member's session of the site, taken at a preview host that shows something.
  const cookie = await memberCookie(t0, t0.owner.id, site.id, `${shown.shortId}--${site.subdomain}`);

  for (const label of ['zzzzzzzz', otherDeployment.shortId, 't0000000000001']) {
    for (const p of ['', 'api/x', '_berth/logout']) {
      const res = await t0.site(`${label}--${site.subdomain}`).get(p, { headers: { cookie } });
      t.is(res.statusCode, 404, `${label} ${p}`);
      t.regex(res.body, /There is no site at this address/, `${label} ${p}`);
      t.is(res.headers['x-robots-tag'], 'noindex', `${label} ${p}`);
    }
  }
  // Not a preview label at all: a name that is no site's.
  for (const host of [`abc--${site.subdomain}`, `${otherDeployment.shortId}-${site.subdomain}`]) {
    const res = await t0.site(host).get('');
    t.is(res.statusCode, 404, host);
    t.is(res.headers['x-robots-tag'], undefined, host);
  }
  t.is((await (await previewOf(otherDeployment.shortId, other)).get('')).body, '<p>other’s</p>');

  // A subdomain that would read as a preview host cannot be made.
  const refused = await t0.owner.api.post('v0/sites', {
    json: { accountId: t0.owner.id, name: 'x', subdomain: `abcdefgh--${site.subdomain}` },
  });
  t.is(refused.statusCode, 409);
  t.is(json(refused).error.code, 'subdomain_reserved');

  // Certificates: a deployment's preview host is served, a made-up one or an instant's is not.
  const allowed = (name: string) =>
    t0.anonymous.get('_berth/tls/allowed', { searchParams: { domain: `${name}.${t0.config.siteHost}` } });
  t.is((await allowed(`${otherDeployment.shortId}--${other.subdomain}`)).statusCode, 200);
  t.is((await allowed(`zzzzzzzz--${other.subdomain}`)).statusCode, 404);
  t.is((await allowed(`t${Date.now()}--${other.subdomain}`)).statusCode, 404);
});

test('a failed deployment is previewed no more, and its preview functions’ modules are removed', async (t) => {
  const site = await createSite(t0.owner);
  const broken = await create(t0.owner, site.id, {
    'web/index.html': '<p>broken</p>',
    'api/ok.ts': FN('ok'),
    'api/bad.ts': 'export default () => {\n',
  });
  const preview = await previewOf(broken.shortId, site);
  t.is((await preview.get('api/ok')).body, 'ok');
  const bad = await preview.get('api/bad');
  t.is(bad.statusCode, 422);
  t.is(JSON.parse(bad.body).error.code, 'function_compile_failed');
  const modules = path.join(t0.dataDir, 'runtime', 'functions', `preview-${site.id}-ok`);
  const versions = () => (fs.existsSync(modules) ? fs.readdirSync(modules) : []);
  t.is(versions().length, 1);

  const failed = await publish(t0.owner, site.id, broken);
  t.is(failed.statusCode, 422);
  t.is(json(failed).error.code, 'deployment_failed');
  t.is((await preview.get('')).statusCode, 404);
  t.is((await preview.get('api/ok')).statusCode, 404);
  t.deepEqual(versions(), [], 'the preview function’s module files are gone');
});

test('a snapshot’s preview host serves the site as it was at that instant', async (t) => {
  const site = await createSite(t0.owner);
  const first = await deploy(t0.owner, site.id, { 'web/index.html': '<p>then</p>', 'api/when.ts': FN('then') });
  await deploy(t0.owner, site.id, { 'web/index.html': '<p>now</p>', 'api/when.ts': FN('now') }, true);

  const snapshot = await t0.owner.read.get(`v0/sites/${site.id}/snapshot`, {
    searchParams: { at: first.publishedAt! },
  });
  t.is(snapshot.statusCode, 200);
  const { previewUrl } = json<{ snapshot: { previewUrl: string } }>(snapshot).snapshot;
  const label = `t${Date.parse(first.publishedAt!)}`;
  t.regex(previewUrl, new RegExp(`^http://${label}--${site.subdomain}\\.localhost:\\d+/$`));
  const preview = await previewOf(label, site);
  const page = await preview.get('');
  t.is(page.body, '<p>then</p>');
  t.is(page.headers['x-robots-tag'], 'noindex');
  t.is((await preview.get('api/when')).body, 'then');
  t.is((await t0.site(site.subdomain).get('')).body, '<p>now</p>');

  // Before the site's history begins there is nothing to show.
  const cookie = await memberCookie(t0, t0.owner.id, site.id, `${label}--${site.subdomain}`);
  const before = await t0
    .site(`t${Date.parse(first.publishedAt!) - 3_600_000}--${site.subdomain}`)
    .get('', { headers: { cookie } });
  t.is(before.statusCode, 404);
  t.regex(before.body, /There is no site at this address/);
});

const PASSWORD = 'a long enough password';

test('a PRIVATE site’s preview asks for sign-in, and signing in comes back to the preview host', async (t) => {
  const site = await createSite(t0.owner, { access: 'PRIVATE' });
  const other = await createSite(t0.owner, { access: 'PRIVATE' });
  await deploy(t0.owner, site.id, { 'web/index.html': '<p>live members</p>' });
  const next = await create(t0.owner, site.id, { 'web/index.html': '<p>preview members</p>' });
  const otherDeployment = await create(t0.owner, other.id, { 'web/index.html': '<p>other</p>' });
  await createUser(t0.berth.deps, {
    email: 'preview-member@example.com',
    accountId: t0.owner.id,
    role: 'MEMBER',
    password: PASSWORD,
  });
  const host = `${next.shortId}--${site.subdomain}`;
  const preview = t0.site(host);

  const gate = await preview.get('docs/?x=1');
  t.is(gate.statusCode, 401);
  t.is(gate.headers['x-robots-tag'], 'noindex');
  const signInUrl = new URL(/<a href="([^"]+)">Sign in<\/a>/.exec(gate.body)![1]!.replace(/&amp;/g, '&'));
  t.is(signInUrl.searchParams.get('site'), site.id);
  t.is(signInUrl.searchParams.get('origin'), `http://${host}.localhost:${t0.berth.port}`);

  const control = got.extend({ prefixUrl: t0.url, throwHttpErrors: false, followRedirect: false, retry: { limit: 0 } });
  const signIn = (origin: string | null) =>
    control.post('login', {
      form: {
        email: 'preview-member@example.com',
        password: PASSWORD,
        site: site.id,
        next: '/',
        ...(origin === null ? {} : { origin }),
      },
    });
  const signedIn = await signIn(signInUrl.searchParams.get('origin'));
  t.is(signedIn.statusCode, 303);
  const back = new URL(signedIn.headers.location!);
  t.is(back.host, `${host}.localhost:${t0.berth.port}`, 'back to the preview host');
  t.is(back.pathname, '/_berth/session');

  const exchanged = await preview.get(`${back.pathname.slice(1)}${back.search}`);
  t.is(exchanged.statusCode, 303);
  t.is(exchanged.headers['x-robots-tag'], 'noindex');
  const pair = (exchanged.headers['set-cookie'] as string[])
    .find((c) => c.startsWith('_berth_session='))!
    .split(';')[0]!;
  const page = await preview.get('', { headers: { cookie: pair } });
  t.is(page.statusCode, 200);
  t.is(page.body, '<p>preview members</p>');

  // Only a preview host of this very site is a place to come back to.
  for (const origin of [
    `http://${otherDeployment.shortId}--${other.subdomain}.localhost:${t0.berth.port}`,
    `http://${next.shortId}--${other.subdomain}.localhost:${t0.berth.port}`,
    'http://evil.example.com',
  ]) {
    const elsewhere = new URL((await signIn(origin)).headers.location!);
    t.is(elsewhere.host, `${site.subdomain}.localhost:${t0.berth.port}`, origin);
  }
});
