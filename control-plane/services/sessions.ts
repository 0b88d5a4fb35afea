// Signing in and server-side sessions. The cookie carries a random token; only its SHA-256 is stored,
// so a copy of the metadata signs no one in. A session ends after IDLE_MS without use or ABSOLUTE_MS
// after sign-in, whichever comes first, and at sign-out. A wrong password and an unknown email get the
// same answer after the same work, and failures are limited per email and per client address.
import { digestToken, newToken } from './tokens.ts';
import { BerthError } from '../errors.ts';
import { AttemptLimit } from './attempt-limit.ts';
import { type Deps, timestamp } from './deps.ts';
import { verifyPassword } from './passwords.ts';
import type { Role, UserRow } from './users.ts';

export const IDLE_MS = 12 * 3600_000;
export const ABSOLUTE_MS = 7 * 24 * 3600_000;
/** last_seen_at is written at most this often, so reading a session is not a write per request. */
const TOUCH_MS = 60_000;

/** Failed sign-ins allowed per email and per client address in a quarter of an hour. */
export const signInLimits = () => ({ email: new AttemptLimit(5, 15 * 60_000), address: new AttemptLimit(20, 15 * 60_000) });


export interface SessionUser {
  id: string;
  email: string;
  memberships: Array<{ accountId: string; role: Role }>;
}

/** Checks the email and password; on success, a new session's token (a fresh one at every sign-in). */
export async function signIn(deps: Deps, input: { email: string; password: string; address: string }): Promise<{ token: string; user: { id: string; email: string } }> {
  const email = input.email.trim().toLowerCase();
  const { email: byEmail, address: byAddress } = deps.signInLimits;
  const wait = Math.max(byEmail.retryAfter(email), byAddress.retryAfter(input.address));
  if (wait > 0) throw new BerthError('too_many_attempts', 'too many failed sign-ins; try again later', { retryAfterSeconds: wait });
  const user = await deps.db<UserRow>('users').where({ email }).first();
  const valid = await verifyPassword(input.password, user?.password_hash ?? null);
  if (!user || !valid) {
    byEmail.fail(email);
    byAddress.fail(input.address);
    throw new BerthError('invalid_credentials', 'the email or the password is wrong');
  }
  byEmail.clear(email);
  const token = newToken();
  const now = deps.now();
  await deps.db('sessions').insert({
    token_hash: digestToken(token),
    user_id: user.id,
    created_at: now.toISOString(),
    last_seen_at: now.toISOString(),
    expires_at: new Date(now.getTime() + ABSOLUTE_MS).toISOString(),
  });
  return { token, user: { id: user.id, email: user.email } };
}

/** The signed-in user behind a session token, or null when there is none or it has ended. */
export async function sessionUser(deps: Deps, token: string): Promise<SessionUser | null> {
  const tokenHash = digestToken(token);
  const session = await deps.db('sessions').where({ token_hash: tokenHash }).first();
  if (!session) return null;
  const now = deps.now().getTime();
  const lastSeen = Date.parse(session.last_seen_at as string);
  if (now >= Date.parse(session.expires_at as string) || now >= lastSeen + IDLE_MS) {
    await deps.db('sessions').where({ token_hash: tokenHash }).delete();
    return null;
  }
  if (now >= lastSeen + TOUCH_MS) await deps.db('sessions').where({ token_hash: tokenHash }).update({ last_seen_at: timestamp(deps) });
  const user = await deps.db<UserRow>('users').where({ id: session.user_id as string }).first();
  if (!user) return null;
  const memberships = (await deps.db('memberships').where({ user_id: user.id }).orderBy('created_at').select('account_id', 'role')) as Array<{ account_id: string; role: Role }>;
  return { id: user.id, email: user.email, memberships: memberships.map((m) => ({ accountId: m.account_id, role: m.role })) };
}

export async function signOut(deps: Deps, token: string): Promise<void> {
  await deps.db('sessions').where({ token_hash: digestToken(token) }).delete();
}
