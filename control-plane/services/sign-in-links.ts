// One-time links where a user sets a password: valid for 24 hours and for one use. Setting the
// password ends every session the user had, then signs them in afresh.
import { digestToken, newToken } from './tokens.ts';
import { BerthError, notFound } from '../errors.ts';
import { type Deps, type Store, timestamp } from '../deps.ts';
import { hashPassword } from './passwords.ts';
import { endSessions, sessionsEnded } from './sessions.ts';
import { checkPassword, findUserByEmail } from './users.ts';

export const LINK_TTL_MS = 24 * 3600_000;
export const SET_PASSWORD_PATH = '/login/set-password';

/** A new link token for `userId`; earlier unused links of the user stay valid until they expire. */
export async function createSignInLink(deps: Store, userId: string): Promise<string> {
  const token = newToken();
  const now = deps.now();
  await deps.db('sign_in_links').insert({
    token_hash: digestToken(token),
    user_id: userId,
    created_at: now.toISOString(),
    expires_at: new Date(now.getTime() + LINK_TTL_MS).toISOString(),
    used_at: null,
  });
  return token;
}

/** `berth admin reset-password`: a new link for the user of `email`. */
export async function resetPassword(
  deps: Store,
  email: string,
): Promise<{ user: { id: string; email: string }; token: string }> {
  const user = await findUserByEmail(deps, email);
  if (!user) throw notFound('user');
  return { user: { id: user.id, email: user.email }, token: await createSignInLink(deps, user.id) };
}

interface LinkRow {
  token_hash: string;
  user_id: string;
  expires_at: string;
  used_at: string | null;
}

/** The link's user while the link can still be used; a used, expired or unknown link is `invalid_link`. */
export async function openSignInLink(deps: Deps, token: string): Promise<{ userId: string; email: string }> {
  const link = await deps
    .db<LinkRow>('sign_in_links')
    .where({ token_hash: digestToken(token) })
    .first();
  if (!link || link.used_at !== null || Date.parse(link.expires_at) <= deps.now().getTime()) {
    throw new BerthError(
      'invalid_link',
      'this link was used already or has expired; ask for a new one (berth admin reset-password)',
    );
  }
  const user = await deps.db('users').where({ id: link.user_id }).first('email');
  return { userId: link.user_id, email: user.email as string };
}

/** Sets the password through a link, once: the link is spent and the user's sessions end, in one transaction. */
export async function setPasswordWithLink(deps: Deps, token: string, password: string): Promise<{ email: string }> {
  checkPassword(password);
  const { userId, email } = await openSignInLink(deps, token);
  const passwordHash = await hashPassword(password);
  await deps.db.transaction(async (trx) => {
    const spent = await trx('sign_in_links')
      .where({ token_hash: digestToken(token), used_at: null })
      .update({ used_at: timestamp(deps) });
    if (spent === 0)
      throw new BerthError(
        'invalid_link',
        'this link was used already; ask for a new one (berth admin reset-password)',
      );
    await trx('users')
      .where({ id: userId })
      .update({ password_hash: passwordHash, updated_at: timestamp(deps) });
    await endSessions(trx, userId);
  });
  await sessionsEnded(deps);
  return { email };
}
