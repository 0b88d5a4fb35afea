// Users: a person with an email and a password, a member of accounts as ADMIN (everything, keys and
// members included) or MEMBER. Emails are compared lowercased; passwords are stored as scrypt hashes.
import { BerthError, notFound } from '../errors.ts';
import { type Role, type Store, newId, timestamp } from '../deps.ts';
import { MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS, hashPassword } from './passwords.ts';

export type { Role };
export const ROLES: readonly Role[] = ['ADMIN', 'MEMBER'];

export interface UserRow {
  id: string;
  email: string;
  password_hash: string | null;
  created_at: string;
  updated_at: string;
}

/** Deliberately loose: one @, something on each side, no spaces; the mailbox itself is the user's word. */
const EMAIL = /^[^\s@]+@[^\s@]+$/;

export function normalizeEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  if (!EMAIL.test(email) || email.length > 254)
    throw new BerthError('invalid_request', `"${raw}" is not an email address`);
  return email;
}

export function checkPassword(password: string): void {
  if (password.length < MIN_PASSWORD_CHARS || password.length > MAX_PASSWORD_CHARS) {
    throw new BerthError('invalid_password', `passwords are ${MIN_PASSWORD_CHARS} to ${MAX_PASSWORD_CHARS} characters`);
  }
}

export const findUserByEmail = (deps: Store, email: string): Promise<UserRow | undefined> =>
  deps
    .db<UserRow>('users')
    .where({ email: normalizeEmail(email) })
    .first();

/**
 * Creates a user as a member of `accountId` with `role`, with a password or none yet (then a one-time
 * link sets it). An existing user of that email joins the account instead: one person, one user.
 */
export async function createUser(
  deps: Store,
  input: { email: string; accountId: string; role: Role; password?: string | undefined },
) {
  const email = normalizeEmail(input.email);
  if (input.password !== undefined) checkPassword(input.password);
  const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
  return deps.db.transaction(async (trx) => {
    if (!(await trx('accounts').where({ id: input.accountId }).first('id'))) throw notFound('account');
    const now = timestamp(deps);
    let user = await trx<UserRow>('users').where({ email }).first();
    if (!user) {
      user = { id: newId(), email, password_hash: passwordHash, created_at: now, updated_at: now };
      await trx('users').insert(user);
    } else if (passwordHash) {
      await trx('users').where({ id: user.id }).update({ password_hash: passwordHash, updated_at: now });
    }
    const member = await trx('memberships').where({ account_id: input.accountId, user_id: user.id }).first('role');
    if (member)
      await trx('memberships').where({ account_id: input.accountId, user_id: user.id }).update({ role: input.role });
    else
      await trx('memberships').insert({
        account_id: input.accountId,
        user_id: user.id,
        role: input.role,
        created_at: now,
      });
    return { user: { id: user.id, email: user.email } };
  });
}
