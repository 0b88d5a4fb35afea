// Reading PRIVATE sites. A signed-in user asks the control plane for a token bound to one site (single
// use, 60 seconds); the site's own host exchanges it for a session of that site only, kept in a cookie
// of that host. Every request checks that the user is still a member of the site's account, so a
// removed member stops reading at once. Only SHA-256 digests of tokens are stored.
import { digestToken, newToken } from './tokens.ts';
import { BerthError } from '../errors.ts';
import type { Deps } from '../deps.ts';
import { ABSOLUTE_MS } from './sessions.ts';

const TOKEN_TTL_MS = 60_000;

/** A single-use token that lets `userId` start a session on `siteId`'s host within a minute. */
export async function createSiteToken(deps: Deps, userId: string, siteId: string): Promise<string> {
  const token = newToken();
  await deps.db('site_tokens').insert({
    token_hash: digestToken(token),
    site_id: siteId,
    user_id: userId,
    expires_at: new Date(deps.now().getTime() + TOKEN_TTL_MS).toISOString(),
    used_at: null,
  });
  return token;
}

/** Spends a token on the site it was made for; returns the new site session's token. */
export async function exchangeSiteToken(deps: Deps, token: string, siteId: string): Promise<string> {
  const now = deps.now();
  const session = newToken();
  await deps.db.transaction(async (trx) => {
    const row = await trx('site_tokens')
      .where({ token_hash: digestToken(token) })
      .first();
    const spent =
      row && row.site_id === siteId
        ? await trx('site_tokens')
            .where({ token_hash: row.token_hash, used_at: null })
            .andWhere('expires_at', '>', now.toISOString())
            .update({ used_at: now.toISOString() })
        : 0;
    if (spent === 0)
      throw new BerthError(
        'invalid_link',
        'this sign-in link was used already, has expired, or is for another site; sign in again',
      );
    await trx('site_sessions').insert({
      token_hash: digestToken(session),
      site_id: siteId,
      user_id: row.user_id,
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + ABSOLUTE_MS).toISOString(),
    });
  });
  return session;
}

/**
 * Who reads `siteId` with this session token: `member` when the user belongs to the site's account,
 * `stranger` when signed in but not a member, null without a valid session of this very site.
 */
export async function siteReader(
  deps: Deps,
  token: string,
  site: { id: string; accountId: string },
): Promise<'member' | 'stranger' | null> {
  const session = await deps
    .db('site_sessions')
    .where({ token_hash: digestToken(token), site_id: site.id })
    .first();
  if (!session || Date.parse(session.expires_at as string) <= deps.now().getTime()) return null;
  const member = await deps
    .db('memberships')
    .where({ user_id: session.user_id as string, account_id: site.accountId })
    .first('role');
  return member ? 'member' : 'stranger';
}

export async function endSiteSession(deps: Deps, token: string): Promise<void> {
  await deps
    .db('site_sessions')
    .where({ token_hash: digestToken(token) })
    .delete();
}
