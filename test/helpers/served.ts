// Clients of a `berth serve` process (test/helpers/process.ts): its owner, whose keys a first start
// prints once, and a site it hosts; and what the nodes of one served instance share.
import path from 'node:path';
import got, { type ExtendOptions, type Got } from 'got';
import { type TestAccount, apiClient } from './berth.ts';
import { objectStoreEnv, onObjectStore } from './object-store.ts';
import { databaseFor } from './postgres.ts';
import type { ServeProcess } from './process.ts';

/**
 * The owner account a first start on an empty data dir printed, with API clients on `url` (by default
 * the server's own; another node of the same instance takes the same keys).
 */
export function ownerOf(server: ServeProcess, url = server.url): TestAccount {
  const output = server.output();
  const printed = (label: string) => new RegExp(`${label}:\\s+(\\S+)`).exec(output)?.[1];
  const [id, writeKey, readKey] = [printed('account'), printed('WRITE key'), printed('READ key')];
  if (!id || !writeKey || !readKey)
    throw new Error(`berth serve printed no owner keys (was its data dir not empty?); its output:\n${output}`);
  return { id, writeKey, readKey, api: apiClient(url, writeKey), read: apiClient(url, readKey) };
}

/** Client for the site at `<subdomain>.localhost` on `server`; redirects are answers, not followed. */
export const siteOn = (server: ServeProcess, subdomain: string, options: ExtendOptions = {}): Got =>
  got.extend(
    {
      prefixUrl: server.url,
      headers: { host: `${subdomain}.localhost:${new URL(server.url).port}` },
      throwHttpErrors: false,
      followRedirect: false,
      retry: { limit: 0 },
    },
    options,
  );

/**
 * What the nodes of one instance share: its metadata (a PostgreSQL database named after the first
 * node's data dir), its files (a bucket of the pass's object store, or one blob dir under `root`) and
 * its master key. Each node keeps a data dir of its own.
 */
export async function sharedInstance(
  root: string,
  firstDataDir: string,
  files: 'object store' | 'blob dir' = onObjectStore ? 'object store' : 'blob dir',
): Promise<Record<string, string>> {
  return {
    BERTH_DATABASE_URL: await databaseFor(firstDataDir),
    BERTH_MASTER_KEY_FILE: path.join(root, 'master.key'),
    ...(files === 'object store' ? await objectStoreEnv(root) : { BERTH_BLOB_DIR: path.join(root, 'blobs') }),
  };
}

/** Stops the served processes still running (SIGTERM, as an operator would) and waits for each to exit. */
export async function stopServed(servers: Array<ServeProcess | undefined>): Promise<void> {
  for (const server of servers) {
    if (!server || server.child.exitCode !== null) continue;
    server.child.kill('SIGTERM');
    await server.exited;
  }
}
