// Rows seeded straight into a migrated metadata through Knex, for tests of the ports below the
// services: an account with its bucket and site, a key, a file's versions, a site database's placement.
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { createAccount } from '../../control-plane/services/accounts.ts';

const now = () => new Date().toISOString();

export interface SeededSite {
  accountId: string;
  bucketId: string;
  siteId: string;
  subdomain: string;
}

/** An account (storage limited to `storageLimitBytes` when given) with a bucket and a site on it. */
export async function seedSite(db: Knex, options: { storageLimitBytes?: number } = {}): Promise<SeededSite> {
  const account = await createAccount({ db, now: () => new Date() }, { name: 'Contract', plan: 'free' });
  if (options.storageLimitBytes !== undefined)
    await db('accounts').where({ id: account.id }).update({ storage_limit_bytes: options.storageLimitBytes });
  const bucketId = crypto.randomUUID();
  const siteId = crypto.randomUUID();
  const subdomain = `s-${siteId.slice(0, 8)}`;
  await db('buckets').insert({
    id: bucketId,
    account_id: account.id,
    name: 'site',
    created_at: now(),
    updated_at: now(),
  });
  await db('sites').insert({
    id: siteId,
    account_id: account.id,
    bucket_id: bucketId,
    name: 'Contract',
    subdomain,
    access: 'PUBLIC',
    status: 'ACTIVE',
    created_at: now(),
    updated_at: now(),
  });
  return { accountId: account.id, bucketId, siteId, subdomain };
}

/** A file at `path` whose versions hold `blobs` (sha256 and size), in order, the last one current. */
export async function seedFile(
  db: Knex,
  bucketId: string,
  path: string,
  blobs: Array<{ sha256: string; bytes: number }>,
): Promise<{ fileId: string; versionIds: string[] }> {
  const fileId = crypto.randomUUID();
  const versionIds = blobs.map(() => crypto.randomUUID());
  await db('files').insert({
    id: fileId,
    bucket_id: bucketId,
    path,
    current_version_id: null,
    created_at: now(),
    updated_at: now(),
  });
  for (const [i, blob] of blobs.entries()) {
    await db('file_versions').insert({
      id: versionIds[i],
      file_id: fileId,
      seq: i + 1,
      blob_sha256: blob.sha256,
      bytes: blob.bytes,
      content_type: 'text/plain',
      restored_from_version_id: null,
      created_at: now(),
    });
  }
  await db('files')
    .where({ id: fileId })
    .update({ current_version_id: versionIds.at(-1) ?? null });
  return { fileId, versionIds };
}

/** A node of the instance, live, reached at `address`. */
export async function seedNode(db: Knex, id: string, address: string): Promise<void> {
  await db('nodes').insert({
    id,
    address,
    roles: 'api,database',
    version: 'contract',
    started_at: now(),
    heartbeat_at: now(),
    stopped_at: null,
  });
}

/** The site's database row, READY and placed on `nodeId`. */
export async function seedDatabase(db: Knex, siteId: string, nodeId: string | null): Promise<string> {
  const id = crypto.randomUUID();
  await db('databases').insert({
    id,
    site_id: siteId,
    status: 'READY',
    node_id: nodeId,
    created_at: now(),
    updated_at: now(),
  });
  return id;
}

/** A SHA-256 in hex, as blobs are named, of `text`. */
export const sha256 = (text: string): string => crypto.createHash('sha256').update(text).digest('hex');
