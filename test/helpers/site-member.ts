// A member of an account reading a site's host as a browser would after signing in: a user of the
// account, a one-use token for the site exchanged at `/_berth/session` on that very host, and a client
// for the host that sends the site session's cookie.
import crypto from 'node:crypto';
import type { Got } from 'got';
import { createSiteToken } from '../../control-plane/services/site-sessions.ts';
import { createUser } from '../../control-plane/services/users.ts';
import type { TestBerth } from './berth.ts';

/**
 * The `_berth_session` cookie pair of a new member of the account, signed in at `host` (the first
 * label(s) before the site host, e.g. `<shortId>--<subdomain>`), a host of the site that shows something.
 */
export async function memberCookie(berth: TestBerth, accountId: string, siteId: string, host: string): Promise<string> {
  const { user } = await createUser(berth.berth.deps, {
    email: `member-${crypto.randomUUID()}@example.com`,
    accountId,
    role: 'MEMBER',
  });
  const exchanged = await berth.site(host).get('_berth/session', {
    searchParams: { token: await createSiteToken(berth.berth.deps, user.id, siteId), next: '/' },
  });
  const cookie = ((exchanged.headers['set-cookie'] as string[] | undefined) ?? [])
    .find((c) => c.startsWith('_berth_session='))
    ?.split(';')[0];
  if (!cookie) throw new Error(`no site session at ${host}: ${exchanged.statusCode} ${exchanged.body}`);
  return cookie;
}

/** A client of `host` for a new member of the account signed in there. */
export async function memberOf(berth: TestBerth, accountId: string, siteId: string, host: string): Promise<Got> {
  const cookie = await memberCookie(berth, accountId, siteId, host);
  return berth.site(host).extend({ headers: { cookie } });
}
