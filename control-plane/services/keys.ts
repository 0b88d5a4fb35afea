// API keys: random bearer tokens (tokens.ts) stored only as SHA-256 digests, each of one account with
// a READ or WRITE permission.
import { notFound } from '../errors.ts';
import { digestToken, newToken } from './tokens.ts';
import { type Actor, type Deps, type Permission, type Store, newId, timestamp } from '../deps.ts';

const KEY_PREFIX = 'berth_';

interface KeyRow {
  id: string;
  account_id: string;
  permission: Permission;
  name: string | null;
  created_by: string | null;
  for_cli: number | boolean;
  key_hash: string;
  created_at: string;
  revoked_at: string | null;
}

export interface KeyInfo {
  id: string;
  accountId: string;
  name: string | null;
  permission: Permission;
  createdAt: string;
  revokedAt: string | null;
}

/** Creates a key and returns its secret once; only the digest is stored. */
export async function createKey(
  deps: Store,
  input: { accountId: string; permission: Permission; name?: string; createdBy?: string; forCli?: boolean },
): Promise<{ id: string; key: string }> {
  const account = await deps.db('accounts').where({ id: input.accountId }).first('id');
  if (!account) throw notFound('account');
  const key = KEY_PREFIX + newToken();
  const id = newId();
  await deps.db('api_keys').insert({
    id,
    account_id: input.accountId,
    permission: input.permission,
    name: input.name ?? null,
    created_by: input.createdBy ?? null,
    for_cli: input.forCli ?? false,
    key_hash: digestToken(key),
    created_at: timestamp(deps),
    revoked_at: null,
  });
  return { id, key };
}

/**
 * Revokes a key; revoking an already revoked key is a no-op that still succeeds. In a server, live log
 * streams hear of it at once through the change feed; the admin CLI has none, and they see it at
 * their next check (BERTH_LOG_STREAM_RECHECK_MS).
 */
export async function revokeKey(deps: Store & Partial<Pick<Deps, 'changes'>>, id: string): Promise<KeyInfo> {
  const row = await deps.db<KeyRow>('api_keys').where({ id }).first();
  if (!row) throw notFound('key');
  if (!row.revoked_at) {
    await deps
      .db('api_keys')
      .where({ id })
      .update({ revoked_at: timestamp(deps) });
    await deps.changes?.publish({ kind: 'credentials' });
  }
  return toKeyInfo((await deps.db<KeyRow>('api_keys').where({ id }).first())!);
}

/** One key of the account. */
export async function getKey(deps: Store, accountId: string, id: string): Promise<KeyInfo> {
  const row = await deps.db<KeyRow>('api_keys').where({ id, account_id: accountId }).first();
  if (!row) throw notFound('key');
  return toKeyInfo(row);
}

export async function listKeys(deps: Store, accountId: string): Promise<KeyInfo[]> {
  const rows = await deps.db<KeyRow>('api_keys').where({ account_id: accountId }).orderBy('created_at');
  return rows.map(toKeyInfo);
}

/** The actor a presented key stands for, or null when it is unknown or revoked. */
export async function authenticate(deps: Pick<Deps, 'hotSql'>, key: string): Promise<Actor | null> {
  if (!key.startsWith(KEY_PREFIX) || key.length > 200) return null;
  const row = await deps.hotSql.get<KeyRow>(
    'SELECT id, account_id, permission, name, created_by, for_cli, key_hash, created_at, revoked_at FROM api_keys WHERE key_hash = ?',
    digestToken(key),
  );
  if (!row || row.revoked_at) return null;
  return { via: row.for_cli ? 'cli' : 'key', accountId: row.account_id, id: row.id, permission: row.permission };
}

const toKeyInfo = (row: KeyRow): KeyInfo => ({
  id: row.id,
  accountId: row.account_id,
  name: row.name,
  permission: row.permission,
  createdAt: row.created_at,
  revokedAt: row.revoked_at,
});
