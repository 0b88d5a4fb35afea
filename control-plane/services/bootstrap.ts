// First run: an empty instance gets an owner account so the operator can start with no other step.
import { createAccount } from './accounts.ts';
import type { Store } from './deps.ts';
import { createKey } from './keys.ts';

export interface OwnerCredentials {
  accountId: string;
  writeKey: string;
  readKey: string;
}

/** Creates the owner account and its two keys when no account exists yet; otherwise returns null. */
export async function ensureOwner(deps: Store): Promise<OwnerCredentials | null> {
  const existing = await deps.db('accounts').first('id');
  if (existing) return null;
  // One transaction: a crash must not leave an owner without keys, which would never be printed.
  return deps.db.transaction(async (trx) => {
    const tx = { ...deps, db: trx };
    const account = await createAccount(tx, { name: 'Owner', plan: 'platform-admin' });
    const write = await createKey(tx, { accountId: account.id, permission: 'WRITE' });
    const read = await createKey(tx, { accountId: account.id, permission: 'READ' });
    return { accountId: account.id, writeKey: write.key, readKey: read.key };
  });
}
