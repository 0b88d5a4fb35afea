// A site with its database, made through the API, and the database's query endpoint.
import type { z } from 'zod';
import type { QueryEnvelope } from '../../control-plane/schemas.ts';
import { type TestAccount, createSite, json } from './berth.ts';

/** A site database's record, as the API answers it. */
export interface DatabaseRecord {
  id: string;
  status: string;
  sizeBytes: number;
  maxBytes: number;
}

/** The query endpoint's answer: the provider-style envelope, as the API's schema has it. */
export type Envelope = z.infer<typeof QueryEnvelope>;

export interface SiteWithDatabase {
  site: Awaited<ReturnType<typeof createSite>>;
  db: DatabaseRecord;
  /** The database's API path: `v0/sites/<site>/databases/<database>`. */
  base: string;
  /** Runs one statement through the query endpoint with the account's WRITE key. */
  query(sql: string, params?: unknown[]): Promise<{ status: number; body: Envelope }>;
}

/** Creates a site of `account` (`site` is its creation body) and its database. */
export async function siteWithDatabase(
  account: TestAccount,
  site: Record<string, unknown> = {},
): Promise<SiteWithDatabase> {
  const created = await createSite(account, site);
  const res = await account.api.post(`v0/sites/${created.id}/databases`);
  if (res.statusCode !== 200)
    throw new Error(`database creation failed: ${res.statusCode} ${JSON.stringify(res.body)}`);
  const db = json<{ database: DatabaseRecord }>(res).database;
  const base = `v0/sites/${created.id}/databases/${db.id}`;
  const query = async (sql: string, params?: unknown[]) => {
    const answer = await account.api.post(`${base}/query`, { json: params ? { sql, params } : { sql } });
    return { status: answer.statusCode, body: json<Envelope>(answer) };
  };
  return { site: created, db, base, query };
}
