// Accounts: the workspace boundary. Created by the operator; a key sees only its own account.
import { notFound } from '../errors.ts';
import { type Actor, type Deps, type Store, newId, timestamp } from '../deps.ts';
import type { Plan } from './plans.ts';

/** Sites an account may create on each plan; null means no cap. */
export const SITE_CAPS: Record<Plan, number | null> = { free: 10, builder: 10_000, 'platform-admin': null };

export interface AccountRow {
  id: string;
  name: string;
  plan: Plan;
  created_at: string;
  updated_at: string;
}

export interface Account {
  id: string;
  name: string;
  plan: Plan;
  createdAt: string;
  updatedAt: string;
}

export const toAccount = (row: AccountRow): Account => ({
  id: row.id,
  name: row.name,
  plan: row.plan,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

export async function createAccount(deps: Store, input: { name: string; plan: Plan }): Promise<Account> {
  const now = timestamp(deps);
  const row: AccountRow = { id: newId(), name: input.name, plan: input.plan, created_at: now, updated_at: now };
  await deps.db('accounts').insert(row);
  return toAccount(row);
}

export async function findAccountRow(deps: Store, id: string): Promise<AccountRow | undefined> {
  return deps.db<AccountRow>('accounts').where({ id }).first();
}

/** The actor's own account; any other id answers not_found so foreign ids reveal nothing. */
export async function getAccount(deps: Deps, actor: Actor, id: string): Promise<Account> {
  if (id !== actor.accountId) throw notFound('account');
  const row = await findAccountRow(deps, id);
  if (!row) throw notFound('account');
  return toAccount(row);
}

export async function updateAccount(deps: Deps, actor: Actor, id: string, input: { name: string }): Promise<Account> {
  await getAccount(deps, actor, id);
  await deps
    .db('accounts')
    .where({ id })
    .update({ name: input.name, updated_at: timestamp(deps) });
  return getAccount(deps, actor, id);
}

/** Throws not_found unless `accountId` is the actor's own account. */
export async function requireOwnAccount(deps: Deps, actor: Actor, accountId: string): Promise<AccountRow> {
  const row = accountId === actor.accountId ? await findAccountRow(deps, accountId) : undefined;
  if (!row) throw notFound('account');
  return row;
}
