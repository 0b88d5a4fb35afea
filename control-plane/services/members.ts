// The people of an account: its members and their roles, and invitations to join. An account always
// keeps at least one ADMIN, so it can never lock itself out of its keys and members.
import type { Knex } from 'knex';
import { BerthError, notFound } from '../errors.ts';
import { lockRows } from '../db/locks.ts';
import { type Actor, type Deps, type Role, newId, timestamp } from '../deps.ts';
import { hashPassword } from './passwords.ts';
import { digestToken, newToken } from './tokens.ts';
import { sessionsEnded } from './sessions.ts';
import { checkPassword, normalizeEmail, type UserRow } from './users.ts';

export const INVITATION_MS = 7 * 24 * 3600_000;
/** Where an invitation's link opens, on the control-plane host. */
export const INVITATION_PATH = '/invite';

export interface Member {
  userId: string;
  email: string;
  role: Role;
  joinedAt: string;
}

export interface Invitation {
  id: string;
  email: string;
  role: Role;
  invitedBy: string;
  createdAt: string;
  expiresAt: string;
}

const memberColumns = [
  'users.id as userId',
  'users.email as email',
  'memberships.role as role',
  'memberships.created_at as joinedAt',
];

export async function listMembers(deps: Deps, actor: Actor): Promise<{ members: Member[] }> {
  const members = (await deps
    .db('memberships')
    .join('users', 'users.id', 'memberships.user_id')
    .where({ account_id: actor.accountId })
    .orderBy('memberships.created_at')
    .select(memberColumns)) as Member[];
  return { members };
}

async function memberRow(db: Knex, accountId: string, userId: string): Promise<Member> {
  const member = (await db('memberships')
    .join('users', 'users.id', 'memberships.user_id')
    .where({ account_id: accountId, user_id: userId })
    .first(memberColumns)) as Member | undefined;
  if (!member) throw notFound('member');
  return member;
}

/**
 * Makes the account's membership changes take turns (on any server), so that each counts the ADMINs
 * the one before it left; the first statement of every such transaction.
 */
const lockMemberships = (trx: Knex.Transaction, accountId: string) => lockRows(trx, 'accounts', { id: accountId });

/** Refuses a change that would leave the account with no ADMIN; runs inside the change's transaction. */
async function keepAnAdmin(trx: Knex.Transaction, accountId: string): Promise<void> {
  const admins = (await trx('memberships')
    .where({ account_id: accountId, role: 'ADMIN' })
    .count({ n: '*' })
    .first()) as { n: number };
  if (Number(admins.n) === 0)
    throw new BerthError('last_admin', 'an account keeps at least one ADMIN: make another member ADMIN first');
}

export async function updateMember(deps: Deps, actor: Actor, userId: string, role: Role): Promise<{ member: Member }> {
  return deps.db.transaction(async (trx) => {
    await lockMemberships(trx, actor.accountId);
    await memberRow(trx, actor.accountId, userId);
    await trx('memberships').where({ account_id: actor.accountId, user_id: userId }).update({ role });
    await keepAnAdmin(trx, actor.accountId);
    return { member: await memberRow(trx, actor.accountId, userId) };
  });
}

/** Removes a member from the account; their sessions stay, but this account's doors close at once. */
export async function removeMember(
  deps: Deps,
  actor: Actor,
  userId: string,
): Promise<{ removed: true; userId: string }> {
  const removed = await deps.db.transaction(async (trx) => {
    await lockMemberships(trx, actor.accountId);
    await memberRow(trx, actor.accountId, userId);
    await trx('memberships').where({ account_id: actor.accountId, user_id: userId }).delete();
    await keepAnAdmin(trx, actor.accountId);
    return { removed: true as const, userId };
  });
  // Their live log streams of this account end now, not at their next check.
  await sessionsEnded(deps);
  return removed;
}

interface InvitationRow {
  id: string;
  token_hash: string;
  account_id: string;
  email: string;
  role: Role;
  invited_by: string;
  created_at: string;
  expires_at: string;
  ended_at: string | null;
}

const toInvitation = (row: InvitationRow): Invitation => ({
  id: row.id,
  email: row.email,
  role: row.role,
  invitedBy: row.invited_by,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
});

/** Open invitations: neither accepted, revoked nor expired. */
export async function listInvitations(deps: Deps, actor: Actor): Promise<{ invitations: Invitation[] }> {
  const rows = await deps
    .db<InvitationRow>('invitations')
    .where({ account_id: actor.accountId, ended_at: null })
    .andWhere('expires_at', '>', timestamp(deps))
    .orderBy('created_at');
  return { invitations: rows.map(toInvitation) };
}

/** An invitation and the path of its single-use link (the token is shown this once only). */
export async function createInvitation(
  deps: Deps,
  actor: Actor,
  input: { email: string; role: Role },
): Promise<{ invitation: Invitation; path: string }> {
  const email = normalizeEmail(input.email);
  const existing = await deps
    .db('memberships')
    .join('users', 'users.id', 'memberships.user_id')
    .where({ account_id: actor.accountId, email })
    .first('users.id');
  if (existing) throw new BerthError('invalid_request', `${email} is a member of this account already`);
  const token = newToken();
  const now = deps.now();
  const row: InvitationRow = {
    id: newId(),
    token_hash: digestToken(token),
    account_id: actor.accountId,
    email,
    role: input.role,
    invited_by: actor.user!.id,
    created_at: now.toISOString(),
    expires_at: new Date(now.getTime() + INVITATION_MS).toISOString(),
    ended_at: null,
  };
  await deps.db('invitations').insert(row);
  return { invitation: toInvitation(row), path: `${INVITATION_PATH}?${new URLSearchParams({ token })}` };
}

export async function revokeInvitation(
  deps: Deps,
  actor: Actor,
  id: string,
): Promise<{ revoked: true; invitationId: string }> {
  const ended = await deps
    .db('invitations')
    .where({ id, account_id: actor.accountId, ended_at: null })
    .update({ ended_at: timestamp(deps) });
  if (ended === 0) throw notFound('open invitation');
  return { revoked: true as const, invitationId: id };
}

export interface OpenInvitation {
  email: string;
  role: Role;
  accountName: string;
  /** The invitee has a password already: they confirm it rather than choose one. */
  hasPassword: boolean;
}

const UNUSABLE = 'this invitation was used already, revoked or has expired; ask for a new one';

async function openRow(db: Knex, deps: Pick<Deps, 'now'>, token: string): Promise<InvitationRow> {
  const row = await db<InvitationRow>('invitations')
    .where({ token_hash: digestToken(token) })
    .first();
  if (!row || row.ended_at || Date.parse(row.expires_at) <= deps.now().getTime())
    throw new BerthError('invalid_invitation', UNUSABLE);
  return row;
}

/** What an invitation link offers, for its page. */
export async function openInvitation(deps: Deps, token: string): Promise<OpenInvitation> {
  const row = await openRow(deps.db, deps, token);
  const account = await deps.db('accounts').where({ id: row.account_id }).first('name');
  const user = await deps.db<UserRow>('users').where({ email: row.email }).first();
  return {
    email: row.email,
    role: row.role,
    accountName: account?.name as string,
    hasPassword: Boolean(user?.password_hash),
  };
}

/**
 * Accepts an invitation, once: a new user chooses a password; an existing one has confirmed theirs
 * (the caller signs them in with it). The link is spent and the membership made in one transaction.
 */
export async function acceptInvitation(
  deps: Deps,
  token: string,
  newPassword?: string,
): Promise<{ email: string; accountId: string }> {
  if (newPassword !== undefined) checkPassword(newPassword);
  const passwordHash = newPassword === undefined ? null : await hashPassword(newPassword);
  return deps.db.transaction(async (trx) => {
    const row = await openRow(trx, deps, token);
    const spent = await trx('invitations')
      .where({ id: row.id, ended_at: null })
      .update({ ended_at: timestamp(deps) });
    if (spent === 0) throw new BerthError('invalid_invitation', UNUSABLE);
    const now = timestamp(deps);
    let user = await trx<UserRow>('users').where({ email: row.email }).first();
    if (user?.password_hash && passwordHash)
      throw new BerthError('invalid_invitation', 'this email has a password already: sign in with it to accept');
    if (!user?.password_hash && !passwordHash)
      throw new BerthError('invalid_password', 'choose a password to accept the invitation');
    if (!user) {
      user = { id: newId(), email: row.email, password_hash: passwordHash, created_at: now, updated_at: now };
      await trx('users').insert(user);
    } else if (passwordHash) {
      await trx('users').where({ id: user.id }).update({ password_hash: passwordHash, updated_at: now });
    }
    const member = await trx('memberships').where({ account_id: row.account_id, user_id: user.id }).first('role');
    if (!member)
      await trx('memberships').insert({
        account_id: row.account_id,
        user_id: user.id,
        role: row.role,
        created_at: now,
      });
    return { email: row.email, accountId: row.account_id };
  });
}
