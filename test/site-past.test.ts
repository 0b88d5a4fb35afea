// A site's past is its owner's (docs/security.md): instant hosts and deployment previews answer only
// the account's signed-in members, pages and functions alike, unless the owner makes a deployment's
// preview PUBLIC; a preview's functions get the site's secrets only when the owner gives them; a version
// can be purged from the history for good; states are rebuilt from checkpoints.
import test from 'ava';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { type Deployment, createDeployment as create, deployFiles as deploy } from './helpers/deployments.ts';
import { memberCookie, memberOf } from './helpers/site-member.ts';
import { until } from './helpers/until.ts';
import { CHECKPOINT_ENTRIES } from '../control-plane/history/site-history.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type Account = TestBerth['owner'];

type Site = Awaited<ReturnType<typeof createSite>>;

/** A function answering the site's secret TOKEN, or the code its read was refused with. */
const SECRET_FN = `export default async (_req: Request, ctx: any) => {
  try {
    return new Response(String(await ctx.secrets.get('TOKEN')));
  } catch (err) {
    return new Response(\`refused \${(err as { code: string }).code}\`, { status: 403 });
  }
};
`;

async function setSecret(account: Account, siteId: string, name: string, value: string) {
  const res = await account.api.post(`v0/sites/${siteId}/secrets`, { json: { name, value } });
  if (res.statusCode !== 201 && res.statusCode !== 200) throw new Error(`secret: ${res.statusCode}`);
}

const host = (label: string, site: Site) => `${label}--${site.subdomain}`;

test('a file deleted from a site is not served to strangers at an instant before the delete; members see it', async (t) => {
  const site = await createSite(t0.owner);
  await deploy(t0.owner, site.id, { 'web/index.html': '<p>home</p>', 'web/secret.txt': 'the old secret' });
  const before = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 5));
  const file = json<{ files: Array<{ id: string }> }>(
    await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects`, { searchParams: { path: 'web/secret.txt' } }),
  ).files[0]!;
  t.truthy(file);
  t.is((await t0.owner.api.delete(`v0/buckets/${site.bucketId}/objects/web/secret.txt`)).statusCode, 200);
  t.is((await t0.site(site.subdomain).get('secret.txt')).statusCode, 404);

  const instant = host(`t${before}`, site);
  for (const path of ['secret.txt', '', 'api/anything', 'nothing-here.txt']) {
    const stranger = await t0.site(instant).get(path);
    t.is(stranger.statusCode, 401, path);
    t.regex(stranger.body, /Sign in/, path);
    t.notRegex(stranger.body, /the old secret/, path);
  }
  const member = await memberOf(t0, t0.owner.id, site.id, instant);
  const seen = await member.get('secret.txt');
  t.is(seen.statusCode, 200);
  t.is(seen.body, 'the old secret');
});

test('a function removed from a site does not run for strangers at an instant, and never gets the secrets there', async (t) => {
  const site = await createSite(t0.owner);
  await setSecret(t0.owner, site.id, 'TOKEN', 'live-token-value');
  await deploy(t0.owner, site.id, { 'web/index.html': 'home', 'api/leak.ts': SECRET_FN });
  t.is((await t0.site(site.subdomain).get('api/leak')).body, 'live-token-value', 'the live function reads it');
  const before = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 5));
  await deploy(t0.owner, site.id, { 'web/index.html': 'home, no functions' }, true);
  t.is((await t0.site(site.subdomain).get('api/leak')).statusCode, 404);

  const instant = host(`t${before}`, site);
  for (const method of ['GET', 'POST'] as const) {
    const stranger = await t0.site(instant)(`api/leak`, { method });
    t.is(stranger.statusCode, 401, method);
    t.notRegex(stranger.body, /live-token-value/, method);
  }
  const member = await memberOf(t0, t0.owner.id, site.id, instant);
  const ran = await member.get('api/leak');
  t.is(ran.statusCode, 403);
  t.is(ran.body, 'refused SECRETS_NOT_GIVEN', 'an instant’s functions never read the secrets');
});

test('a deployment’s preview answers members only until its owner makes it PUBLIC; a READ key cannot', async (t) => {
  const site = await createSite(t0.owner);
  await deploy(t0.owner, site.id, { 'web/index.html': '<p>live</p>' });
  const next = await create(t0.owner, site.id, { 'web/index.html': '<p>next</p>', 'api/hi.ts': FN('hi') });
  t.is(next.previewAccess, 'PRIVATE');
  t.false(next.previewSecrets);
  const preview = t0.site(host(next.shortId, site));
  for (const path of ['', 'api/hi']) t.is((await preview.get(path)).statusCode, 401, path);
  // A label that shows nothing looks the same to a stranger.
  t.is((await t0.site(host('zzzzzzzz', site)).get('')).statusCode, 401);
  // A member's session of another site is worth nothing here.
  const elsewhere = await createSite(t0.owner);
  const shown = await deploy(t0.owner, elsewhere.id, { 'web/index.html': 'other' });
  const cookie = await memberCookie(t0, t0.owner.id, elsewhere.id, host(shown.shortId, elsewhere));
  for (const path of ['', 'api/hi']) t.is((await preview.get(path, { headers: { cookie } })).statusCode, 401, path);

  const refused = await t0.owner.read.post(`v0/sites/${site.id}/deployments/${next.id}`, {
    json: { previewAccess: 'PUBLIC' },
  });
  t.is(refused.statusCode, 403);
  t.is(json(refused).error.code, 'forbidden');
  const empty = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${next.id}`, { json: {} });
  t.is(empty.statusCode, 400);
  t.is(json(empty).error.code, 'invalid_request');
  const wrong = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${next.id}`, {
    json: { previewAccess: 'EVERYONE' },
  });
  t.is(wrong.statusCode, 400);
  t.is(json(wrong).error.code, 'invalid_request');

  const opened = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${next.id}`, {
    json: { previewAccess: 'PUBLIC' },
  });
  t.is(opened.statusCode, 200);
  t.is(json<{ deployment: Deployment }>(opened).deployment.previewAccess, 'PUBLIC');
  t.is((await preview.get('')).body, '<p>next</p>');
  t.is((await preview.get('api/hi')).body, 'hi');

  const closed = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${next.id}`, {
    json: { previewAccess: 'PRIVATE' },
  });
  t.is(closed.statusCode, 200);
  t.is((await preview.get('')).statusCode, 401, 'closed again at once');

  // Another account's key sees no such deployment.
  const stranger = await t0.newAccount();
  const foreign = await stranger.api.post(`v0/sites/${site.id}/deployments/${next.id}`, {
    json: { previewAccess: 'PUBLIC' },
  });
  t.is(foreign.statusCode, 404);
  t.is(json(foreign).error.code, 'not_found');
});

test('a PUBLIC preview of a PRIVATE site still asks for sign-in for its pages, as the live site does', async (t) => {
  const site = await createSite(t0.owner, { access: 'PRIVATE' });
  const next = await create(t0.owner, site.id, { 'web/index.html': '<p>members</p>', 'api/hi.ts': FN('hi') });
  await t0.owner.api.post(`v0/sites/${site.id}/deployments/${next.id}`, { json: { previewAccess: 'PUBLIC' } });
  const preview = t0.site(host(next.shortId, site));
  t.is((await preview.get('')).statusCode, 401);
  t.is((await preview.get('api/hi')).body, 'hi', 'functions are anonymous, as on the live site');
});

test('a preview’s functions get the site’s secrets only once the owner gives them, and lose them when taken back', async (t) => {
  const site = await createSite(t0.owner);
  await setSecret(t0.owner, site.id, 'TOKEN', 'preview-token-value');
  const next = await create(t0.owner, site.id, { 'api/leak.ts': SECRET_FN });
  const member = await memberOf(t0, t0.owner.id, site.id, host(next.shortId, site));
  t.is((await member.get('api/leak')).body, 'refused SECRETS_NOT_GIVEN');

  const given = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${next.id}`, {
    json: { previewSecrets: true },
  });
  t.true(json<{ deployment: Deployment }>(given).deployment.previewSecrets);
  t.is((await member.get('api/leak')).body, 'preview-token-value');

  await t0.owner.api.post(`v0/sites/${site.id}/deployments/${next.id}`, { json: { previewSecrets: false } });
  t.is((await member.get('api/leak')).body, 'refused SECRETS_NOT_GIVEN');
});

test('a version the kept deployments hold can be purged: the deployments say so and their previews lose the file', async (t) => {
  const site = await createSite(t0.owner);
  const first = await deploy(t0.owner, site.id, { 'web/index.html': 'v1', 'web/leaked.txt': 'a leaked key' });
  const fileId = json<{ files: Array<{ id: string }> }>(
    await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects`, { searchParams: { path: 'web/leaked.txt' } }),
  ).files[0]!.id;
  const versionId = json<{ deployment: Deployment }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments/${first.id}`),
  ).deployment.fileList.find((f) => f.path === 'web/leaked.txt')!.versionId!;
  const before = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 5));
  await deploy(t0.owner, site.id, { 'web/index.html': 'v2' }, true);
  const member = await memberOf(t0, t0.owner.id, site.id, host(first.shortId, site));
  t.is((await member.get('leaked.txt')).body, 'a leaked key');

  const readOnly = await t0.owner.read.delete(`v0/files/${fileId}/versions/${versionId}`);
  t.is(readOnly.statusCode, 403);
  t.is(json(readOnly).error.code, 'forbidden');
  const purged = await t0.owner.api.delete(`v0/files/${fileId}/versions/${versionId}`);
  t.is(purged.statusCode, 200);
  t.like(json<{ purgedFromDeployments: number }>(purged), { deleted: true, purgedFromDeployments: 1 });

  const held = json<{ deployment: Deployment }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments/${first.id}`),
  ).deployment;
  t.is(held.purgedFiles, 1);
  t.true(held.fileList.find((f) => f.path === 'web/leaked.txt')!.purged);
  t.is((await member.get('leaked.txt')).statusCode, 404, 'its preview no longer has it');
  t.is((await member.get('')).body, 'v1');
  const instant = await memberOf(t0, t0.owner.id, site.id, host(`t${before}`, site));
  t.is((await instant.get('leaked.txt')).statusCode, 404, 'nor the instant');
  const snapshot = json<{ files: Array<{ path: string }> }>(
    await t0.owner.read.get(`v0/sites/${site.id}/snapshot`, { searchParams: { at: new Date(before).toISOString() } }),
  );
  t.deepEqual(
    snapshot.files.map((f) => f.path),
    ['web/index.html'],
  );
  // Going back to it brings back what it still holds.
  const promoted = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${first.id}/promote`);
  t.is(promoted.statusCode, 200);
  t.is((await t0.site(site.subdomain).get('')).body, 'v1');
  t.is((await t0.site(site.subdomain).get('leaked.txt')).statusCode, 404);
});

test('states are rebuilt from checkpoints: a long history keeps one, and every instant reads as it was', async (t) => {
  const site = await createSite(t0.owner);
  const many: Record<string, string> = {};
  for (let i = 0; i < CHECKPOINT_ENTRIES; i++) many[`web/p${i}.txt`] = `page ${i}`;
  const first = await deploy(t0.owner, site.id, many);
  const checkpoints = async () =>
    (await t0.berth.deps.db('history_checkpoints').where({ site_id: site.id }).select('seq', 'files')) as Array<{
      seq: number;
      files: number;
    }>;
  t.deepEqual(
    (await checkpoints()).map((c) => [Number(c.seq), Number(c.files)]),
    [[first.seq, CHECKPOINT_ENTRIES]],
  );
  await putFile(t0.owner, site.bucketId, 'web/p0.txt', 'page 0, again', 'text/plain');
  // Instants on the server's clock: it gives each timestamp once, so a publish of a thousand files may
  // leave it ahead of the wall clock for a moment.
  const serverNow = () => t0.berth.deps.now().getTime();
  const afterWrite = serverNow();
  await new Promise((resolve) => setTimeout(resolve, 5));
  await deploy(t0.owner, site.id, { 'web/only.txt': 'alone' }, true);

  const at = async (time: number) =>
    json<{ snapshot: { files: number } }>(
      await t0.owner.read.get(`v0/sites/${site.id}/snapshot`, {
        searchParams: { at: new Date(time).toISOString(), limit: 1 },
      }),
    ).snapshot.files;
  t.is(await at(Date.parse(first.publishedAt!)), CHECKPOINT_ENTRIES);
  t.is(await at(afterWrite), CHECKPOINT_ENTRIES);
  t.is(await at(serverNow()), 1);
  const member = await memberOf(t0, t0.owner.id, site.id, host(`t${afterWrite}`, site));
  t.is((await member.get('p0.txt')).body, 'page 0, again');
  t.is((await member.get('p999.txt')).body, 'page 999');
});

test('a site changed only through the file API keeps checkpoints of its history too', async (t) => {
  const site = await createSite(t0.owner);
  // A write looks for a checkpoint one time in 64 at random: 600 writes past the threshold miss every
  // look with a chance of about 1 in 10,000.
  const writes = CHECKPOINT_ENTRIES + 600;
  for (let next = 0; next < writes; ) {
    const batch = Array.from({ length: Math.min(16, writes - next) }, (_, i) => next + i);
    next += batch.length;
    await Promise.all(
      batch.map((i) => putFile(t0.owner, site.bucketId, `web/w${i % 50}.txt`, `write ${i}`, 'text/plain')),
    );
  }
  const kept = await until(
    async () =>
      (await t0.berth.deps.db('history_checkpoints').where({ site_id: site.id }).first('seq', 'files')) as
        | { seq: number; files: number }
        | undefined,
    'a checkpoint of the history',
  );
  t.is(Number(kept.files), 50);
  const member = await memberOf(t0, t0.owner.id, site.id, host(`t${Date.now()}`, site));
  t.regex((await member.get('w49.txt')).body, /^write \d+$/);
});

function FN(text: string) {
  return `export default () => new Response('${text}');\n`;
}
