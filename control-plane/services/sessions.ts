// Signing in and server-side sessions. The cookie carries a random token; only its SHA-256 is stored,
// so a copy of the metadata signs no one in. A session ends after IDLE_MS without use or ABSOLUTE_MS
// after sign-in, whichever comes first, and at sign-out. A wrong password and an unknown email get the
// same answer after the same work, and failures are limited per email and per client address.
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { digestToken, newToken } from './tokens.ts';
import { BerthError } from '../errors.ts';
import { AttemptLimit } from './attempt-limit.ts';
import type { Metadata } from '../db/metadata.ts';
import { type Actor, type Deps, timestamp } from '../deps.ts';
import { hashPassword, verifyPassword } from './passwords.ts';
import { type Role, type UserRow, checkPassword } from './users.ts';

export const IDLE_MS = 12 * 3600_000;
export const ABSOLUTE_MS = 7 * 24 * 3600_000;
/** last_seen_at is written at most this often, so reading a session is not a write per request. */
const TOUCH_MS = 60_000;

/** Failed sign-ins allowed per email and per client address in a quarter of an hour. */
export const signInLimits = (metadata: Pick<Metadata, 'rateLimiter'>) => ({
  email: new AttemptLimit(metadata, 'sign-in-email', 5, 15 * 60_000),
  address: new AttemptLimit(metadata, 'sign-in-address', 20, 15 * 60_000),
});

export interface SessionUser {
  id: string;
  email: string;
  memberships: Array<{ accountId: string; accountName: string; role: Role }>;
}

/**
 * The session's anti-forgery token: a page of the dashboard reads it from /session (same origin only)
 * and sends it with every API request made with the cookie, which another site cannot do. Derived, so
 * nothing more is stored: it changes with the session and cannot be computed without the master key.
 */
export const csrfToken = (deps: Pick<Deps, 'masterKey'>, sessionToken: string): string =>
  crypto
    .createHmac('sha256', deps.masterKey)
    .update(`berth csrf\0${digestToken(sessionToken)}`)
    .digest('base64url');

/** Checks the email and password; on success, a new session's token (a fresh one at every sign-in). */
export async function signIn(
  deps: Deps,
  input: { email: string; password: string; address: string },
): Promise<{ token: string; user: { id: string; email: string } }> {
  const email = input.email.trim().toLowerCase();
  const { email: byEmail, address: byAddress } = deps.signInLimits;
  const wait = Math.max(await byEmail.retryAfter(email), await byAddress.retryAfter(input.address));
  if (wait > 0)
    throw new BerthError('too_many_attempts', 'too many failed sign-ins; try again later', { retryAfterSeconds: wait });
  const user = await deps.db<UserRow>('users').where({ email }).first();
  const valid = await verifyPassword(input.password, user?.password_hash ?? null);
  if (!user || !valid) {
    await byEmail.fail(email);
    await byAddress.fail(input.address);
    throw new BerthError('invalid_credentials', 'the email or the password is wrong');
  }
  await byEmail.clear(email);
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
  if (now >= lastSeen + TOUCH_MS)
    await deps
      .db('sessions')
      .where({ token_hash: tokenHash })
      .update({ last_seen_at: timestamp(deps) });
  const user = await deps
    .db<UserRow>('users')
    .where({ id: session.user_id as string })
    .first();
  if (!user) return null;
  const memberships = (await deps
    .db('memberships')
    .join('accounts', 'accounts.id', 'memberships.account_id')
    .where({ user_id: user.id })
    .orderBy('memberships.created_at')
    .select('account_id', 'accounts.name as account_name', 'role')) as Array<{
    account_id: string;
    account_name: string;
    role: Role;
  }>;
  return {
    id: user.id,
    email: user.email,
    memberships: memberships.map((m) => ({ accountId: m.account_id, accountName: m.account_name, role: m.role })),
  };
}

export async function signOut(deps: Deps, token: string): Promise<void> {
  await deps
    .db('sessions')
    .where({ token_hash: digestToken(token) })
    .delete();
  await sessionsEnded(deps);
}

/** Tells live log streams (on every node) that sessions ended: theirs may be one of them. */
export const sessionsEnded = (deps: Pick<Deps, 'changes'>): Promise<void> =>
  deps.changes.publish({ kind: 'credentials' });

/**
 * Ends the user's sessions, on the control plane and on PRIVATE sites, at once: after a password is
 * set, nobody who knew the old one stays signed in. `keepSessionHash` spares the session that changed it.
 */
export async function endSessions(db: Knex, userId: string, keepSessionHash?: string): Promise<void> {
  const sessions = db('sessions').where({ user_id: userId });
  if (keepSessionHash) sessions.whereNot({ token_hash: keepSessionHash });
  await sessions.delete();
  await db('site_sessions').where({ user_id: userId }).delete();
}

/**
 * A signed-in user changes their password, giving the current one (failures count like sign-ins):
 * every other session of theirs ends at once, on the control plane and on PRIVATE sites.
 */
export async function changePassword(
  deps: Deps,
  actor: Actor,
  input: { currentPassword: string; newPassword: string },
): Promise<{ changed: true }> {
  const { id, email, sessionHash } = actor.user!;
  checkPassword(input.newPassword);
  const limit = deps.signInLimits.email;
  const wait = await limit.retryAfter(email);
  if (wait > 0)
    throw new BerthError('too_many_attempts', 'too many wrong passwords; try again later', { retryAfterSeconds: wait });
  const user = await deps.db<UserRow>('users').where({ id }).first();
  if (!(await verifyPassword(input.currentPassword, user?.password_hash ?? null))) {
    await limit.fail(email);
    throw new BerthError('invalid_credentials', 'the current password is wrong');
  }
  const passwordHash = await hashPassword(input.newPassword);
  await deps.db.transaction(async (trx) => {
    await trx('users')
      .where({ id })
      .update({ password_hash: passwordHash, updated_at: timestamp(deps) });
    await endSessions(trx, id, sessionHash);
  });
  await sessionsEnded(deps);
  return { changed: true };
}
