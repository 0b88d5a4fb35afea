// Starts a real Berth server on a random port with a temp data dir, and gives tests HTTP clients for
// its API and its hosted sites. Node does not resolve *.localhost, so site requests set the Host header.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import got, { type Got } from 'got';
import { type Config, DEFAULTS } from '../../control-plane/config.ts';
import { type Berth, type StartOptions, startBerth } from '../../control-plane/server.ts';
import type { Plan } from '../../control-plane/services/plans.ts';
import { createAccount } from '../../control-plane/services/accounts.ts';
import { createKey } from '../../control-plane/services/keys.ts';
import { databaseFor, onPostgres } from './postgres.ts';
import { objectStoreFor, onObjectStore } from './object-store.ts';

export interface TestAccount {
  id: string;
  writeKey: string;
  readKey: string;
  /** API client authenticated with the WRITE key. */
  api: Got;
  /** API client authenticated with the READ key. */
  read: Got;
}

export interface TestBerth {
  berth: Berth;
  config: Config;
  url: string;
  dataDir: string;
  /** The owner account created on first start. */
  owner: TestAccount;
  /** API client with no credentials. */
  anonymous: Got;
  /** Client for the hosted site at `<subdomain>.<site host>`. */
  site(subdomain: string): Got;
  newAccount(plan?: Plan): Promise<TestAccount>;
  dispose(): Promise<void>;
}

const base = got.extend({
  throwHttpErrors: false,
  retry: { limit: 0 },
  responseType: 'json',
  timeout: { request: 60_000 },
});

export function apiClient(url: string, key?: string): Got {
  return base.extend({ prefixUrl: url, headers: key ? { authorization: `Bearer ${key}` } : {} });
}

/** A fresh data dir; pass `t` to have it removed when the test ends. */
export async function makeDataDir(t?: { teardown(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-test-'));
  // A server killed by its test may leave a Deno child writing its cache for a moment: retry on ENOTEMPTY.
  t?.teardown(() => fs.rm(dir, { recursive: true, force: true, maxRetries: 10 }));
  return dir;
}

export async function startTestBerth(overrides: Partial<Config> = {}, options: StartOptions = {}): Promise<TestBerth> {
  const dataDir = overrides.dataDir ?? (await makeDataDir());
  const databaseUrl = overrides.databaseUrl ?? (onPostgres ? await databaseFor(dataDir) : '');
  const objectStore =
    overrides.objectStore !== undefined || overrides.blobDir
      ? (overrides.objectStore ?? null)
      : onObjectStore
        ? await objectStoreFor(dataDir)
        : null;
  const config: Config = { ...DEFAULTS, port: 0, logLevel: 'silent', ...overrides, dataDir, databaseUrl, objectStore };
  const berth = await startBerth(config, options);
  const owner = berth.owner!;
  const account = (id: string, writeKey: string, readKey: string): TestAccount => ({
    id,
    writeKey,
    readKey,
    get api() {
      return apiClient(berth.url, writeKey);
    },
    get read() {
      return apiClient(berth.url, readKey);
    },
  });

  const handle: TestBerth = {
    berth,
    config,
    get url() {
      return berth.url;
    },
    dataDir,
    owner: account(owner.accountId, owner.writeKey, owner.readKey),
    get anonymous() {
      return apiClient(berth.url);
    },
    site(subdomain) {
      return base.extend({
        prefixUrl: berth.url,
        responseType: 'text',
        headers: { host: `${subdomain}.${config.siteHost}:${berth.port}` },
        followRedirect: false,
      });
    },
    async newAccount(plan: Plan = 'free') {
      const created = await createAccount(berth.deps, { name: `Account ${plan}`, plan });
      const write = await createKey(berth.deps, { accountId: created.id, permission: 'WRITE' });
      const read = await createKey(berth.deps, { accountId: created.id, permission: 'READ' });
      return account(created.id, write.key, read.key);
    },
    async dispose() {
      await berth.close();
      await fs.rm(dataDir, { recursive: true, force: true, maxRetries: 10 });
    },
  };
  return handle;
}

/** Creates a site through the API and returns its record. */
export async function createSite(account: TestAccount, body: Record<string, unknown> = {}) {
  const res = await account.api.post('v0/sites', { json: { accountId: account.id, name: 'Test site', ...body } });
  if (res.statusCode !== 201) throw new Error(`site creation failed: ${res.statusCode} ${JSON.stringify(res.body)}`);
  return res.body as unknown as {
    id: string;
    subdomain: string;
    bucketId: string;
    access: string;
    status: string;
    url: string;
  };
}

/** Writes a file through the API and returns the write-file response. */
export async function putFile(
  account: TestAccount,
  bucketId: string,
  filePath: string,
  body: string | Buffer,
  contentType?: string,
) {
  const res = await account.api.put(`v0/buckets/${bucketId}/objects/${filePath}`, {
    body,
    headers: contentType ? { 'content-type': contentType } : {},
  });
  if (res.statusCode !== 200) throw new Error(`write failed: ${res.statusCode} ${JSON.stringify(res.body)}`);
  return res.body as unknown as WriteBody;
}

export interface WriteBody {
  id: string;
  fileId: string;
  versionId: string;
  path: string;
  bytes: number;
  contentType: string;
  deployment?: {
    siteId: string;
    sourcePath: string;
    status: string;
    functionId?: string;
    error?: { message: string; line: number; column: number };
  };
}

export interface ErrorBody {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

/** A response's parsed JSON body, typed as the test expects it (got types bodies as strings). */
export function json<T = ErrorBody>(res: { body: unknown }): T {
  return res.body as T;
}

const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/functions');

/** Uploads test/fixtures/functions/<fixture>.ts as api/<name>.ts and returns the write response. */
export async function deployFixture(account: TestAccount, bucketId: string, fixture: string, name = fixture) {
  const source = await fs.readFile(path.join(FIXTURES, `${fixture}.ts`));
  const written = await putFile(account, bucketId, `api/${name}.ts`, source, 'text/typescript');
  if (written.deployment?.status !== 'READY')
    throw new Error(`deployment of ${fixture} failed: ${JSON.stringify(written.deployment)}`);
  return written;
}
