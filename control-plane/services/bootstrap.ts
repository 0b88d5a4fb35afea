// First run: an empty instance gets an owner account, its keys and its owner user, so the operator can
// start with no other step.
import { createAccount } from './accounts.ts';
import type { Store } from '../deps.ts';
import { lockName } from '../db/locks.ts';
import { createKey } from './keys.ts';
import { createSignInLink } from './sign-in-links.ts';
import { createUser } from './users.ts';

export interface OwnerCredentials {
  accountId: string;
  writeKey: string;
  readKey: string;
  /** The owner user, an ADMIN of the account with no password yet… */
  email: string;
  /** …which the one-time sign-in link of this token sets. */
  signInToken: string;
}

/** Creates the owner account, its two keys and its owner user when no account exists yet; otherwise returns null. */
export async function ensureOwner(deps: Store, owner: { email: string }): Promise<OwnerCredentials | null> {
  if (await deps.db('accounts').first('id')) return null;
  // One transaction: a crash must not leave an owner without keys, which would never be printed. Servers
  // starting together on one database take turns, and only the first finds no account.
  return deps.db.transaction(async (trx) => {
    await lockName(trx, 'bootstrap');
    if (await trx('accounts').first('id')) return null;
    const tx = { ...deps, db: trx };
    const account = await createAccount(tx, { name: 'Owner', plan: 'platform-admin' });
    const write = await createKey(tx, { accountId: account.id, permission: 'WRITE' });
    const read = await createKey(tx, { accountId: account.id, permission: 'READ' });
    const { user } = await createUser(tx, { email: owner.email, accountId: account.id, role: 'ADMIN' });
    const signInToken = await createSignInLink(tx, user.id);
    return { accountId: account.id, writeKey: write.key, readKey: read.key, email: user.email, signInToken };
  });
}
