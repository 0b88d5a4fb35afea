// Site secrets: named values encrypted at rest, never echoed by writes, returned only by get-value,
// and every such retrieval recorded in the site's access log.
import { BerthError, notFound } from '../errors.ts';
import { open, seal } from '../../storage/master-key.ts';
import { type Actor, type Deps, timestamp } from '../deps.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { requireSite } from './site-rows.ts';

/** Environment-variable style, so secrets map cleanly onto configuration names. */
export const SECRET_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;

/** Where a retrieval came from, for the access log. */
export type FrontDoor = 'API' | 'CLI' | 'DASHBOARD';

/**
 * The front door is the one that built the actor: a signed-in user reads through
 * the dashboard, the CLI's own credential through the CLI, an API key through the API. No header a
 * client sets can change it.
 */
const FRONT_DOORS: Record<Actor['via'], FrontDoor> = { key: 'API', cli: 'CLI', session: 'DASHBOARD', function: 'API' };

interface SecretRow {
  site_id: string;
  name: string;
  value_ciphertext: string;
  created_at: string;
  updated_at: string;
}

interface AccessLogRow {
  id: number;
  site_id: string;
  secret_name: string;
  key_id: string;
  via: FrontDoor;
  accessed_at: string;
}

const context = (siteId: string, name: string) => `secret:${siteId}:${name}`;

function checkName(name: string): void {
  if (!SECRET_NAME_PATTERN.test(name)) {
    throw new BerthError(
      'invalid_secret_name',
      'secret names are 1–128 letters, digits and underscores, not starting with a digit',
    );
  }
}

function checkValue(value: string): void {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes === 0 || bytes > MAX_SECRET_VALUE_BYTES) {
    throw new BerthError('invalid_secret_value', `secret values are 1–${MAX_SECRET_VALUE_BYTES} bytes of UTF-8`);
  }
}

export async function listSecrets(deps: Deps, actor: Actor, siteId: string, page: PageRequest) {
  await requireSite(deps, actor, siteId);
  const query = deps.db('secrets').where({ site_id: siteId }).orderBy('name');
  const { items, pagination } = await paginate(query, page, (row: SecretRow) => ({
    name: row.name,
    updatedAt: row.updated_at,
  }));
  return { secrets: items, pagination };
}

/** Creates or replaces a secret; `mustExist` makes a missing secret a 404 instead. */
export async function setSecret(
  deps: Deps,
  actor: Actor,
  siteId: string,
  input: { name: string; value: string },
  mustExist = false,
) {
  await requireSite(deps, actor, siteId);
  checkName(input.name);
  checkValue(input.value);
  const now = timestamp(deps);
  const sealed = seal(deps.masterKey, input.value, context(siteId, input.name));
  const existing = await deps.db('secrets').where({ site_id: siteId, name: input.name }).first('name');
  if (existing) {
    await deps
      .db('secrets')
      .where({ site_id: siteId, name: input.name })
      .update({ value_ciphertext: sealed, updated_at: now });
  } else {
    if (mustExist) throw notFound('secret');
    await deps
      .db('secrets')
      .insert({ site_id: siteId, name: input.name, value_ciphertext: sealed, created_at: now, updated_at: now });
  }
  return { secret: { name: input.name, updatedAt: now } };
}

/** Returns a secret's value and records who read it, through what, and when. */
export async function getSecretValue(deps: Deps, actor: Actor, siteId: string, name: string) {
  await requireSite(deps, actor, siteId);
  checkName(name);
  const row = await deps.db<SecretRow>('secrets').where({ site_id: siteId, name }).first();
  if (!row) throw notFound('secret');
  const value = open(deps.masterKey, row.value_ciphertext, context(siteId, name));
  await deps.db('secret_access_logs').insert({
    site_id: siteId,
    secret_name: name,
    key_id: actor.id,
    via: FRONT_DOORS[actor.via],
    accessed_at: timestamp(deps),
  });
  return { secret: { name, value } };
}

export async function deleteSecret(deps: Deps, actor: Actor, siteId: string, name: string) {
  await requireSite(deps, actor, siteId);
  checkName(name);
  const deleted = await deps.db('secrets').where({ site_id: siteId, name }).delete();
  if (deleted === 0) throw notFound('secret');
  return { deleted: true as const };
}

export async function listAccessLogs(deps: Deps, actor: Actor, siteId: string, page: PageRequest) {
  await requireSite(deps, actor, siteId);
  // A signed-in user's read is recorded as `user:<id>`; the entry names them by email.
  const query = deps
    .db('secret_access_logs')
    .where({ site_id: siteId })
    .orderBy('id', 'desc')
    .select(
      '*',
      deps.db.raw(
        "(SELECT email FROM users WHERE secret_access_logs.key_id LIKE 'user:%' AND users.id = substr(secret_access_logs.key_id, 6)) AS user_email",
      ),
    );
  const { items, pagination } = await paginate(query, page, (row: AccessLogRow & { user_email: string | null }) => ({
    id: row.id,
    secretName: row.secret_name,
    keyId: row.key_id,
    via: row.via,
    accessedAt: row.accessed_at,
    ...(row.user_email ? { userEmail: row.user_email } : {}),
  }));
  return { accessLogs: items, pagination };
}

/** A function's read of its own site's secret: the value, or null when there is none. */
export async function readSecretForSite(deps: Deps, siteId: string, name: string): Promise<string | null> {
  if (!SECRET_NAME_PATTERN.test(name)) return null;
  const row = await deps.db<SecretRow>('secrets').where({ site_id: siteId, name }).first();
  return row ? open(deps.masterKey, row.value_ciphertext, context(siteId, name)) : null;
}
