// The paths answered outside the Koa stack give the answers the Koa apps give: the API's query
// endpoint on its lean path against the same route through Koa's router, and the error answers of
// every lean path over HTTPS. Berth trusts a proxy here, so X-Forwarded-* stands for one.
import test from 'ava';
import { type TestBerth, createSite, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth({ trustProxy: true });
});
test.after.always(async () => {
  await t0?.dispose();
});

const overHttps = { 'x-forwarded-proto': 'https' };

test('an error answer of a lean site path over HTTPS keeps Strict-Transport-Security', async (t) => {
  const site = await createSite(t0.owner);
  const missingFunction = await t0.site(site.subdomain).get('api/missing', { headers: overHttps });
  t.is(missingFunction.statusCode, 404);
  t.is(JSON.parse(missingFunction.body).error.code, 'function_not_found');
  t.is(missingFunction.headers['strict-transport-security'], 'max-age=31536000');
  const served = await t0.site(site.subdomain).get('', { headers: overHttps });
  t.is(served.headers['strict-transport-security'], 'max-age=31536000', 'as on an answer that is not an error');
});
