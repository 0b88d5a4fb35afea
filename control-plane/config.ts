// The one place that reads the environment: every other module receives a typed Config.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ObjectStoreLocation } from '../storage/drivers/s3-driver.ts';

export interface Config {
  port: number;
  bind: string;
  siteHost: string;
  /**
   * Where people reach the control plane, e.g. https://example.com, for the links Berth makes (sign-in,
   * invitations, export downloads, the gate's); sites are then at <sub>.<siteHost> with its scheme and
   * port. Empty: links use the address each request came to (and http for sites).
   */
  publicUrl: string;
  /** Honour X-Forwarded-Proto, -For and -Host: only behind a proxy that sets them, on a port nobody else reaches. */
  trustProxy: boolean;
  /** The bearer token GET /metrics asks for on the main port; empty: not served there. */
  metricsToken: string;
  /** host:port of a listener of its own that serves /metrics without a token; empty: none. */
  metricsAddress: string;
  dataDir: string;
  /**
   * Where the metadata lives: a postgres:// (or postgresql://) URL puts it on PostgreSQL; empty: in
   * meta.sqlite in the data dir.
   */
  databaseUrl: string;
  /** Connections Berth keeps open to PostgreSQL at most (each of its two pools). */
  databasePool: number;
  /** Where file bytes live (content-addressed); empty: <data dir>/blobs (see blobDirOf). */
  blobDir: string;
  /** File bytes and exports in an S3-compatible bucket instead; null: in blobDir. */
  objectStore: ObjectStoreLocation | null;
  /** Memory for small blobs read often (static files, ctx.data), in front of either store; 0: none. */
  blobCacheBytes: number;
  /** The key that seals secrets at rest, made on first start; empty: <data dir>/master.key (see masterKeyFileOf). */
  masterKeyFile: string;
  /** The email of the owner user made on first run. */
  ownerEmail: string;
  maxFileBytes: number;
  /** Bytes an account's file versions may hold (each blob once), unless the operator set its own limit. */
  accountStorageBytes: number;
  /** How often blobs no version references are removed (each once unused that long); 0: never. */
  blobSweepMs: number;
  /** Each site database's write-ahead log is copied to its replica as it is written (Litestream). */
  databaseReplication: boolean;
  /** Where replicas go without an object store; empty: <data dir>/database-replicas (see replicaDirOf). */
  databaseReplicaDir: string;
  /** How far back a site database can be restored. */
  databaseRetentionMs: number;
  /** The bytes one database's replica may take: its oldest history is dropped past them. */
  databaseReplicaMaxBytes: number;
  /** A database node whose heartbeat is this old has its databases taken over from their replicas; 0: never by itself. */
  databaseFailoverMs: number;
  maxJsonBytes: number;
  logLevel: string;
  shutdownGraceMs: number;
  /** Deno executable; empty means the one installed from the deno npm package. */
  denoPath: string;
  /** The npm registry builds resolve packages from (BERTH_NPM_REGISTRY, else npm's own configuration). */
  npmRegistry: string;
  /** Package versions published less recently than this are not used by builds, in minutes; 0: any. */
  npmMinAgeMinutes: number;
  /** How long one build may take. */
  buildTimeoutMs: number;
  functionTimeoutMs: number;
  functionHeapMb: number;
  functionIdleMs: number;
  /** Function workers (Deno processes) alive at most, spares included. */
  maxWorkers: number;
  /** Memory of their own (resident less shared pages) all function workers together may hold. */
  workerMemoryBytes: number;
  /** Function workers kept started ahead of need, bound to no function until a cold call takes one; 0: none. */
  spareWorkers: number;
  maxFunctionBodyBytes: number;
  /** Outbound requests of one site's functions in flight at most; more wait for a turn. */
  egressConnectionsPerSite: number;
  /** DNS servers the egress proxy resolves names with (host or host:port); empty: the system's resolver. */
  egressDnsServers: string[];
  /** DNS servers (host or host:port) that custom domains' TXT records are looked up with; empty: the system's. */
  dnsServers: string[];
  /** Published deployments per site whose files' versions stay pinned (not deletable), so they can be rolled back to. */
  deploymentsKept: number;
  /** How often each node looks for UPLOADING deployments past their day, to expire them. */
  deploymentExpiryCheckMs: number;
  /** How often an ACTIVE custom domain's TXT record is looked up again; 0: never. */
  domainCheckMs: number;
  /** How long an ACTIVE domain's TXT record may be missing before the domain goes back to PENDING. */
  domainGraceMs: number;
  functionLogsPerSite: number;
  /** How often a live log stream checks its key or session again (besides at once when one is revoked). */
  logStreamRecheckMs: number;
  /** Whether sites' traffic is counted for their analytics. */
  analytics: boolean;
  /** How often each node writes the traffic it counted (aligned to the period's end). */
  analyticsFlushMs: number;
  /** Time limit of one site database statement or batch. */
  databaseTimeoutMs: number;
  /** Site database processes alive at most. */
  maxDatabaseProcesses: number;
  /** Size a site database may grow to, enforced by SQLite (max_page_count). */
  siteDatabaseMaxBytes: number;
  /** How often the cron scheduler looks for due jobs; 0 turns automatic ticks off. */
  cronTickMs: number;
  /** This server's name among the nodes of an instance; empty: the host name and a digest of the data dir. */
  nodeId: string;
  /** What this node does: serve sites and the API (`web`), hold site databases (`database`). */
  roles: NodeRole[];
  /** Where the other nodes reach this one's cluster listener, an http(s):// origin; empty: nowhere (a single node). */
  clusterAddress: string;
  /** host:port the cluster listener listens on; empty: the host and port of clusterAddress. */
  clusterListen: string;
  /** PEM files for TLS on peer calls, both ways (this node's certificate and key, the CA of every node's); null: plain HTTP. */
  clusterTls: { cert: string; key: string; ca: string } | null;
  /** HTTPS by Berth itself (BERTH_TLS=acme); null: none (plain HTTP, or a proxy in front terminates TLS). */
  tls: TlsConfig | null;
  /**
   * Preview hosts that may get a certificate in any 7 days (BERTH_TLS=acme, or a proxy asking
   * /_berth/tls/allowed): each is a name of its own under the site host, whose certificates the CA
   * limits per week. 0: previews get none (a wildcard certificate covers them, or nothing does).
   */
  previewCertificatesPerWeek: number;
  llm: LlmConfig;
}

/** Certificates from an ACME CA for every name Berth serves, got on demand by HTTP-01 on port 80. */
export interface TlsConfig {
  /** Where the HTTPS and port-80 listeners listen: every address by default (BERTH_BIND stays the plain listener's). */
  bind: string;
  httpsPort: number;
  /** Answers ACME's HTTP-01 challenges and redirects everything else to HTTPS. */
  httpPort: number;
  /** The ACME directory: Let's Encrypt's production one by default. */
  directory: string;
  /** The contact the CA writes to about the account's certificates; empty: none. */
  email: string;
  /** A PEM file of a CA trusted for the directory's own HTTPS besides the system's (a test CA); empty: none. */
  caFile: string;
  /** How often certificates due for renewal are looked for. */
  renewCheckMs: number;
}

export const LETS_ENCRYPT = 'https://acme-v02.api.letsencrypt.org/directory';

export const NODE_ROLES = ['web', 'database'] as const;
export type NodeRole = (typeof NODE_ROLES)[number];

/** Where ctx.llm sends model calls; provider '' means none is configured. */
export interface LlmConfig {
  provider: '' | 'openai' | 'anthropic';
  baseUrl: string;
  apiKey: string;
  /** Provider model names for Berth's two model names. */
  models: { 'model-6-luna': string; 'model-6.1-sol': string };
  timeoutMs: number;
  /** Calls an account may make per UTC day. */
  dailyCalls: number;
}

const MIB = 1024 * 1024;

/**
 * The share of the machine's memory function workers may hold by default. Berth owns its VM: the rest
 * is for its own process, the site database processes and the page cache.
 */
const WORKER_MEMORY_SHARE = 0.7;
/** An idle warm worker holds about 12 MiB of its own (docs/benchmarks.md, many tenants); the count allows 16. */
const IDLE_WORKER_BYTES = 16 * MIB;

/** The default memory budget of function workers: a share of the machine's memory, in whole MiB. */
export function workerMemoryFor(totalBytes: number): number {
  return Math.floor((totalBytes * WORKER_MEMORY_SHARE) / MIB) * MIB;
}

/** The default worker count: as many idle workers as the memory budget holds, 64 to 10,000. */
export function workersFor(totalBytes: number): number {
  return Math.min(10_000, Math.max(64, Math.floor(workerMemoryFor(totalBytes) / IDLE_WORKER_BYTES)));
}

export const DEFAULTS: Config = {
  port: 8080,
  bind: '127.0.0.1',
  siteHost: 'localhost',
  publicUrl: '',
  trustProxy: false,
  metricsToken: '',
  metricsAddress: '',
  dataDir: './.berth',
  databaseUrl: '',
  databasePool: 10,
  blobDir: '',
  objectStore: null,
  blobCacheBytes: 64 * 1024 * 1024,
  masterKeyFile: '',
  ownerEmail: 'owner@localhost',
  maxFileBytes: 512 * 1024 * 1024,
  accountStorageBytes: 10 * 1024 ** 3,
  blobSweepMs: 3600_000,
  databaseReplication: true,
  databaseReplicaDir: '',
  databaseRetentionMs: 7 * 24 * 3600_000,
  // Twice the largest database by default: a full copy of it and as much history again.
  databaseReplicaMaxBytes: 2 * 1024 ** 3,
  databaseFailoverMs: 30_000,
  maxJsonBytes: 1024 * 1024,
  logLevel: 'info',
  shutdownGraceMs: 10_000,
  denoPath: '',
  npmRegistry: 'https://registry.npmjs.org/',
  npmMinAgeMinutes: 1440,
  buildTimeoutMs: 60_000,
  functionTimeoutMs: 30_000,
  functionHeapMb: 128,
  functionIdleMs: 5 * 60_000,
  maxWorkers: workersFor(os.totalmem()),
  workerMemoryBytes: workerMemoryFor(os.totalmem()),
  spareWorkers: 4,
  maxFunctionBodyBytes: 10 * 1024 * 1024,
  egressConnectionsPerSite: 16,
  egressDnsServers: [],
  dnsServers: [],
  deploymentsKept: 20,
  deploymentExpiryCheckMs: 60_000,
  domainCheckMs: 3600_000,
  domainGraceMs: 72 * 3600_000,
  functionLogsPerSite: 1000,
  logStreamRecheckMs: 30_000,
  analytics: true,
  analyticsFlushMs: 60_000,
  databaseTimeoutMs: 30_000,
  maxDatabaseProcesses: 32,
  siteDatabaseMaxBytes: 1024 ** 3,
  cronTickMs: 1000,
  nodeId: '',
  roles: ['web', 'database'],
  clusterAddress: '',
  clusterListen: '',
  clusterTls: null,
  tls: null,
  previewCertificatesPerWeek: 10,
  llm: {
    provider: '',
    baseUrl: '',
    apiKey: '',
    models: { 'model-6-luna': '', 'model-6.1-sol': '' },
    timeoutMs: 45_000,
    dailyCalls: 1000,
  },
};

export const blobDirOf = (config: Pick<Config, 'blobDir' | 'dataDir'>): string =>
  config.blobDir || path.join(config.dataDir, 'blobs');
export const replicaDirOf = (config: Pick<Config, 'databaseReplicaDir' | 'dataDir'>): string =>
  config.databaseReplicaDir || path.join(config.dataDir, 'database-replicas');
export const masterKeyFileOf = (config: Pick<Config, 'masterKeyFile' | 'dataDir'>): string =>
  config.masterKeyFile || path.join(config.dataDir, 'master.key');

export class ConfigError extends Error {}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: 24 * 3600_000 };

/** A length of time written with its unit: `90s`, `30m`, `36h`, `7d`. */
function duration(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const match = /^(\d+)([smhd])$/.exec(raw);
  const value = match ? Number(match[1]) * UNITS[match[2]!]! : Number.NaN;
  if (!(value >= min && value <= max))
    throw new ConfigError(
      `${name} must be a duration such as 36h or 7d, from ${min / 3600_000} hours to ${max / UNITS.d!} days, got "${raw}"`,
    );
  return value;
}

/** BERTH_DATABASE_FAILOVER_MS: 0 (off), or long enough that a node fences itself (half of it) after two missed heartbeats. */
function failoverMs(env: NodeJS.ProcessEnv): number {
  const value = integer(env, 'BERTH_DATABASE_FAILOVER_MS', DEFAULTS.databaseFailoverMs, 0, 24 * 3600_000);
  if (value !== 0 && value < 20_000)
    throw new ConfigError(`BERTH_DATABASE_FAILOVER_MS must be 0 (off) or at least 20000, got "${value}"`);
  return value;
}

function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

/** An origin (scheme, host, port) people reach Berth at, without a path. */
function publicUrl(env: NodeJS.ProcessEnv): string {
  const raw = env.BERTH_PUBLIC_URL?.trim();
  if (!raw) return '';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`BERTH_PUBLIC_URL must be a URL such as "https://example.com", got "${raw}"`);
  }
  if (
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    url.pathname !== '/'
  ) {
    throw new ConfigError(
      `BERTH_PUBLIC_URL must be an http:// or https:// origin with no path, such as "https://example.com", got "${raw}"`,
    );
  }
  return url.origin;
}

/**
 * The registry builds use: BERTH_NPM_REGISTRY, else the one npm itself is configured with (its
 * environment variable, then the user's .npmrc), else npm's public registry.
 */
function npmRegistry(env: NodeJS.ProcessEnv): string {
  const name = env.BERTH_NPM_REGISTRY?.trim() ? 'BERTH_NPM_REGISTRY' : 'npm_config_registry';
  const raw =
    env.BERTH_NPM_REGISTRY?.trim() ||
    env.npm_config_registry?.trim() ||
    env.NPM_CONFIG_REGISTRY?.trim() ||
    npmrcRegistry(env) ||
    DEFAULTS.npmRegistry;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL such as "https://registry.npmjs.org/", got "${raw}"`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash)
    throw new ConfigError(`${name} must be an http:// or https:// URL with no query, got "${raw}"`);
  return url.href.endsWith('/') ? url.href : `${url.href}/`;
}

/** `registry=` of the user's .npmrc, where npm reads it; '' when there is none. */
function npmrcRegistry(env: NodeJS.ProcessEnv): string {
  const home = env.HOME ?? os.homedir();
  try {
    const line = fs
      .readFileSync(path.join(home, '.npmrc'), 'utf8')
      .split('\n')
      .find((l) => /^\s*registry\s*=/.test(l));
    return line?.split('=').slice(1).join('=').trim() ?? '';
  } catch {
    return '';
  }
}

function metricsToken(env: NodeJS.ProcessEnv): string {
  const token = env.BERTH_METRICS_TOKEN?.trim() ?? '';
  if (token && (token.length < 16 || /\s/.test(token)))
    throw new ConfigError(
      'BERTH_METRICS_TOKEN must be at least 16 characters with no spaces (e.g. `openssl rand -hex 24`)',
    );
  return token;
}

/** host:port, e.g. 127.0.0.1:9464 (brackets around an IPv6 host). */
function metricsAddress(env: NodeJS.ProcessEnv): string {
  const raw = env.BERTH_METRICS_ADDRESS?.trim() ?? '';
  if (raw && !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(raw))
    throw new ConfigError(`BERTH_METRICS_ADDRESS must be host:port, such as 127.0.0.1:9464, got "${raw}"`);
  return raw;
}

/** BERTH_DATABASE_URL: a PostgreSQL URL, checked for its form only (the server is reached at start). */
function databaseUrl(env: NodeJS.ProcessEnv): string {
  const raw = env.BERTH_DATABASE_URL?.trim() ?? '';
  if (!raw) return '';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(
      'BERTH_DATABASE_URL must be a URL such as postgres://berth:password@db.example.com:5432/berth',
    );
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    // The URL may hold a password: name only its scheme.
    throw new ConfigError(
      `BERTH_DATABASE_URL must be a postgres:// or postgresql:// URL, got one starting with ${url.protocol}//`,
    );
  }
  if (!url.pathname.replace(/^\//, ''))
    throw new ConfigError('BERTH_DATABASE_URL must name a database, such as postgres://berth@localhost/berth');
  return raw;
}

/** BERTH_EGRESS_DNS_SERVERS or BERTH_DNS_SERVERS: IP addresses, each with an optional port (`[v6]:port` for IPv6). */
function dnsServers(env: NodeJS.ProcessEnv, name: 'BERTH_EGRESS_DNS_SERVERS' | 'BERTH_DNS_SERVERS'): string[] {
  const raw = env[name]?.trim() ?? '';
  if (!raw) return [];
  const servers = raw.split(',').map((s) => s.trim());
  for (const server of servers) {
    if (!/^(\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?|\[[0-9a-fA-F:.]+\](:\d{1,5})?|[0-9a-fA-F:]+)$/.test(server)) {
      throw new ConfigError(
        `${name} must be IP addresses with optional ports, such as "192.0.2.53,[2001:db8::53]:5353", got "${server}"`,
      );
    }
  }
  return servers;
}

/** BERTH_OBJECT_STORE=s3://<bucket>[/<prefix>] with BERTH_S3_ENDPOINT, BERTH_S3_REGION, BERTH_S3_FORCE_PATH_STYLE. */
function objectStore(env: NodeJS.ProcessEnv): ObjectStoreLocation | null {
  const raw = env.BERTH_OBJECT_STORE?.trim() ?? '';
  return raw ? objectStoreLocation(raw, env, 'BERTH_OBJECT_STORE') : null;
}

/** An s3://<bucket>[/<prefix>] URL (named `name` in errors) with the BERTH_S3_* settings of `env`. */
export function objectStoreLocation(raw: string, env: NodeJS.ProcessEnv, name: string): ObjectStoreLocation {
  const match = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(raw);
  const bucket = match?.[1] ?? '';
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new ConfigError(
      `${name} must be s3://<bucket>[/<prefix>] with a valid bucket name, such as s3://berth-blobs/production, got "${raw}"`,
    );
  }
  const prefix = (match?.[2] ?? '').replace(/^\/+|\/+$/g, '');
  const endpoint = env.BERTH_S3_ENDPOINT?.trim() ?? '';
  if (endpoint) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {}
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) {
      throw new ConfigError(
        'BERTH_S3_ENDPOINT must be an http:// or https:// URL without credentials, such as https://s3.example.com',
      );
    }
  }
  return {
    bucket,
    prefix: prefix ? `${prefix}/` : '',
    ...(endpoint ? { endpoint } : {}),
    region: text(env, 'BERTH_S3_REGION', text(env, 'AWS_REGION', 'us-east-1')),
    forcePathStyle: flag(env, 'BERTH_S3_FORCE_PATH_STYLE', false),
    silenceMs: integer(env, 'BERTH_S3_TIMEOUT_MS', 30_000, 100, 3600_000),
  };
}

/** BERTH_NODE_ID: a name other nodes and the operator see, also in `berth admin` commands' arguments. */
function nodeId(env: NodeJS.ProcessEnv): string {
  const raw = env.BERTH_NODE_ID?.trim() ?? '';
  if (raw && !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/.test(raw)) {
    throw new ConfigError(
      `BERTH_NODE_ID must be 1–100 letters, digits, dots, dashes, underscores or colons, starting with a letter or digit, got "${raw}"`,
    );
  }
  return raw;
}

/** BERTH_ROLES: a comma-separated list of web and database, at least one. */
function roles(env: NodeJS.ProcessEnv): NodeRole[] {
  const raw = env.BERTH_ROLES?.trim() ?? '';
  if (!raw) return DEFAULTS.roles;
  const listed = raw.split(',').map((role) => role.trim().toLowerCase());
  const unknown = listed.filter((role) => !(NODE_ROLES as readonly string[]).includes(role));
  if (unknown.length > 0)
    throw new ConfigError(`BERTH_ROLES must list web, database or both, such as "web,database", got "${raw}"`);
  return NODE_ROLES.filter((role) => listed.includes(role));
}

/** BERTH_CLUSTER_ADDRESS: the origin of this node's cluster listener as the other nodes reach it, https:// with TLS. */
function clusterAddress(env: NodeJS.ProcessEnv, tls: boolean): string {
  const raw = env.BERTH_CLUSTER_ADDRESS?.trim() ?? '';
  if (!raw) return '';
  const scheme = tls ? 'https:' : 'http:';
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {}
  if (
    !url ||
    url.protocol !== scheme ||
    !url.port ||
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    url.pathname !== '/'
  ) {
    throw new ConfigError(
      `BERTH_CLUSTER_ADDRESS must be an ${scheme}// origin with a port and no path, such as "${scheme}//10.0.0.2:8081"${tls ? ' (the cluster listener uses TLS: BERTH_CLUSTER_TLS_* are set)' : ''}, got "${raw}"`,
    );
  }
  return url.origin;
}

/** BERTH_CLUSTER_TLS_CERT, _KEY and _CA: all three files, or none. */
function clusterTls(env: NodeJS.ProcessEnv): Config['clusterTls'] {
  const files = {
    cert: optionalPath(env, 'BERTH_CLUSTER_TLS_CERT'),
    key: optionalPath(env, 'BERTH_CLUSTER_TLS_KEY'),
    ca: optionalPath(env, 'BERTH_CLUSTER_TLS_CA'),
  };
  const given = Object.values(files).filter(Boolean).length;
  if (given === 0) return null;
  if (given < 3)
    throw new ConfigError(
      'BERTH_CLUSTER_TLS_CERT, BERTH_CLUSTER_TLS_KEY and BERTH_CLUSTER_TLS_CA go together: this node\u2019s certificate, its key, and the CA that signed every node\u2019s',
    );
  return files;
}

/** BERTH_CLUSTER_LISTEN: host:port (brackets around an IPv6 host); empty: the host and port of the cluster address. */
function clusterListen(env: NodeJS.ProcessEnv, address: string): string {
  const raw = env.BERTH_CLUSTER_LISTEN?.trim() ?? '';
  if (raw && !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(raw))
    throw new ConfigError(`BERTH_CLUSTER_LISTEN must be host:port, such as 0.0.0.0:8081, got "${raw}"`);
  if (raw && !address)
    throw new ConfigError(
      'BERTH_CLUSTER_LISTEN needs BERTH_CLUSTER_ADDRESS: the address the other nodes reach the cluster listener at',
    );
  return raw;
}

/** An absolute path, or '' when the variable is unset. */
function optionalPath(env: NodeJS.ProcessEnv, name: string): string {
  const raw = env[name]?.trim();
  return raw ? path.resolve(raw) : '';
}

function text(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const raw = env[name]?.trim();
  return raw ? raw : fallback;
}

/** Reads BERTH_* variables; anything unset takes the embedded default. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const siteHost = text(env, 'BERTH_SITE_HOST', DEFAULTS.siteHost).toLowerCase();
  if (!/^[a-z0-9.-]+$/.test(siteHost) || siteHost.startsWith('.') || siteHost.endsWith('.')) {
    throw new ConfigError(
      `BERTH_SITE_HOST must be a host name such as "localhost" or "example.com", got "${siteHost}"`,
    );
  }
  const logLevel = text(env, 'BERTH_LOG_LEVEL', DEFAULTS.logLevel);
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`BERTH_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent`);
  }
  const dataDir = path.resolve(text(env, 'BERTH_DATA_DIR', DEFAULTS.dataDir));
  const tls = clusterTls(env);
  const address = clusterAddress(env, tls !== null);
  if (tls && !address)
    throw new ConfigError('BERTH_CLUSTER_TLS_* need BERTH_CLUSTER_ADDRESS: TLS is for peer calls, between nodes');
  const databaseUrlValue = databaseUrl(env);
  const nodeRoles = roles(env);
  // Nodes share their metadata on PostgreSQL; on SQLite there is only ever one node, and it holds every database.
  if (!databaseUrlValue && address)
    throw new ConfigError(
      'BERTH_CLUSTER_ADDRESS needs BERTH_DATABASE_URL: the nodes of a cluster share their metadata on PostgreSQL',
    );
  const tlsSettings = tlsConfig(env);
  const trustProxy = flag(env, 'BERTH_TRUST_PROXY', DEFAULTS.trustProxy);
  // With HTTPS by Berth itself, Berth is what clients reach: a forwarded header would be theirs to write.
  if (tlsSettings && trustProxy)
    throw new ConfigError(
      'BERTH_TRUST_PROXY is for a proxy in front that terminates TLS; with BERTH_TLS=acme Berth terminates it: set one or the other',
    );
  if (!databaseUrlValue && !nodeRoles.includes('database'))
    throw new ConfigError(
      'BERTH_ROLES must include database when the metadata is on SQLite: this node is the only one',
    );
  return {
    port: integer(env, 'BERTH_PORT', DEFAULTS.port, 0, 65535),
    bind: text(env, 'BERTH_BIND', DEFAULTS.bind),
    siteHost,
    publicUrl: publicUrl(env),
    trustProxy,
    metricsToken: metricsToken(env),
    metricsAddress: metricsAddress(env),
    dataDir,
    databaseUrl: databaseUrlValue,
    databasePool: integer(env, 'BERTH_DATABASE_POOL', DEFAULTS.databasePool, 1, 1000),
    blobDir: optionalPath(env, 'BERTH_BLOB_DIR'),
    objectStore: objectStore(env),
    blobCacheBytes: integer(env, 'BERTH_BLOB_CACHE_BYTES', DEFAULTS.blobCacheBytes, 0, Number.MAX_SAFE_INTEGER),
    masterKeyFile: optionalPath(env, 'BERTH_MASTER_KEY_FILE'),
    ownerEmail: text(env, 'BERTH_OWNER_EMAIL', DEFAULTS.ownerEmail),
    maxFileBytes: integer(env, 'BERTH_MAX_FILE_BYTES', DEFAULTS.maxFileBytes, 1, Number.MAX_SAFE_INTEGER),
    accountStorageBytes: integer(
      env,
      'BERTH_ACCOUNT_STORAGE_BYTES',
      DEFAULTS.accountStorageBytes,
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    blobSweepMs: integer(env, 'BERTH_BLOB_SWEEP_MS', DEFAULTS.blobSweepMs, 0, 7 * 24 * 3600_000),
    databaseReplication: flag(env, 'BERTH_DATABASE_REPLICATION', DEFAULTS.databaseReplication),
    databaseReplicaDir: optionalPath(env, 'BERTH_DATABASE_REPLICA_DIR'),
    databaseFailoverMs: failoverMs(env),
    databaseRetentionMs: duration(
      env,
      'BERTH_DATABASE_RETENTION',
      DEFAULTS.databaseRetentionMs,
      3600_000,
      365 * 24 * 3600_000,
    ),
    maxJsonBytes: DEFAULTS.maxJsonBytes,
    logLevel,
    shutdownGraceMs: integer(env, 'BERTH_SHUTDOWN_GRACE_MS', DEFAULTS.shutdownGraceMs, 0, 600_000),
    denoPath: text(env, 'BERTH_DENO', DEFAULTS.denoPath),
    npmRegistry: npmRegistry(env),
    npmMinAgeMinutes: integer(env, 'BERTH_NPM_MIN_AGE_MINUTES', DEFAULTS.npmMinAgeMinutes, 0, 525_600),
    buildTimeoutMs: integer(env, 'BERTH_BUILD_TIMEOUT_MS', DEFAULTS.buildTimeoutMs, 1000, 15 * 60_000),
    functionTimeoutMs: integer(env, 'BERTH_FUNCTION_TIMEOUT_MS', DEFAULTS.functionTimeoutMs, 100, 15 * 60_000),
    functionHeapMb: integer(env, 'BERTH_FUNCTION_MEMORY_MB', DEFAULTS.functionHeapMb, 16, 16_384),
    functionIdleMs: integer(env, 'BERTH_FUNCTION_IDLE_MS', DEFAULTS.functionIdleMs, 100, 24 * 3600_000),
    maxWorkers: integer(env, 'BERTH_MAX_WORKERS', DEFAULTS.maxWorkers, 1, 10_000),
    workerMemoryBytes:
      integer(env, 'BERTH_WORKER_MEMORY_MB', DEFAULTS.workerMemoryBytes / MIB, 64, 16 * 1024 * 1024) * MIB,
    spareWorkers: integer(env, 'BERTH_SPARE_WORKERS', DEFAULTS.spareWorkers, 0, 64),
    maxFunctionBodyBytes: integer(
      env,
      'BERTH_FUNCTION_MAX_BODY_BYTES',
      DEFAULTS.maxFunctionBodyBytes,
      1,
      64 * 1024 * 1024 - 1024,
    ),
    egressConnectionsPerSite: integer(
      env,
      'BERTH_EGRESS_CONNECTIONS_PER_SITE',
      DEFAULTS.egressConnectionsPerSite,
      1,
      10_000,
    ),
    egressDnsServers: dnsServers(env, 'BERTH_EGRESS_DNS_SERVERS'),
    dnsServers: dnsServers(env, 'BERTH_DNS_SERVERS'),
    deploymentsKept: integer(env, 'BERTH_DEPLOYMENTS_KEPT', DEFAULTS.deploymentsKept, 1, 10_000),
    deploymentExpiryCheckMs: integer(
      env,
      'BERTH_DEPLOYMENT_EXPIRY_CHECK_MS',
      DEFAULTS.deploymentExpiryCheckMs,
      100,
      3600_000,
    ),
    domainCheckMs: integer(env, 'BERTH_DOMAIN_CHECK_MS', DEFAULTS.domainCheckMs, 0, 7 * 24 * 3600_000),
    domainGraceMs: integer(env, 'BERTH_DOMAIN_GRACE_MS', DEFAULTS.domainGraceMs, 0, 90 * 24 * 3600_000),
    functionLogsPerSite: integer(env, 'BERTH_FUNCTION_LOGS_PER_SITE', DEFAULTS.functionLogsPerSite, 10, 1_000_000),
    logStreamRecheckMs: integer(env, 'BERTH_LOG_STREAM_RECHECK_MS', DEFAULTS.logStreamRecheckMs, 100, 30_000),
    analytics: flag(env, 'BERTH_ANALYTICS', DEFAULTS.analytics),
    analyticsFlushMs: integer(env, 'BERTH_ANALYTICS_FLUSH_MS', DEFAULTS.analyticsFlushMs, 100, 3600_000),
    databaseTimeoutMs: integer(env, 'BERTH_DATABASE_TIMEOUT_MS', DEFAULTS.databaseTimeoutMs, 100, 15 * 60_000),
    // A replica holds at least a copy of its database: below 1 MiB it could hold no history at all.
    databaseReplicaMaxBytes: integer(
      env,
      'BERTH_DATABASE_REPLICA_MAX_BYTES',
      DEFAULTS.databaseReplicaMaxBytes,
      1024 * 1024,
      Number.MAX_SAFE_INTEGER,
    ),
    maxDatabaseProcesses: integer(env, 'BERTH_MAX_DATABASE_PROCESSES', DEFAULTS.maxDatabaseProcesses, 1, 10_000),
    // A site database holds at least its ledger and a few tables: 1 MiB is the smallest useful size.
    siteDatabaseMaxBytes: integer(
      env,
      'BERTH_SITE_DATABASE_MAX_BYTES',
      DEFAULTS.siteDatabaseMaxBytes,
      1024 * 1024,
      Number.MAX_SAFE_INTEGER,
    ),
    cronTickMs: integer(env, 'BERTH_CRON_TICK_MS', DEFAULTS.cronTickMs, 0, 60_000),
    nodeId: nodeId(env),
    roles: nodeRoles,
    clusterAddress: address,
    clusterListen: clusterListen(env, address),
    clusterTls: tls,
    tls: tlsSettings,
    previewCertificatesPerWeek: integer(
      env,
      'BERTH_TLS_PREVIEW_CERTIFICATES_PER_WEEK',
      DEFAULTS.previewCertificatesPerWeek,
      0,
      1000,
    ),
    llm: loadLlmConfig(env),
  };
}

/** BERTH_TLS=acme and the BERTH_HTTPS_PORT, BERTH_HTTP_PORT, BERTH_TLS_BIND and BERTH_ACME_* that go with it. */
function tlsConfig(env: NodeJS.ProcessEnv): TlsConfig | null {
  const mode = text(env, 'BERTH_TLS', '').toLowerCase();
  if (mode === '' || mode === 'off') return null;
  if (mode !== 'acme')
    throw new ConfigError(
      `BERTH_TLS must be "acme" (certificates from an ACME CA such as Let's Encrypt), got "${mode}"`,
    );
  const directory = text(env, 'BERTH_ACME_DIRECTORY', LETS_ENCRYPT);
  let url: URL | undefined;
  try {
    url = new URL(directory);
  } catch {}
  if (url?.protocol !== 'https:')
    throw new ConfigError(`BERTH_ACME_DIRECTORY must be an https:// URL of an ACME directory, got "${directory}"`);
  const email = text(env, 'BERTH_ACME_EMAIL', '');
  if (email && !/^[^\s@]+@[^\s@]+$/.test(email))
    throw new ConfigError(`BERTH_ACME_EMAIL must be an email address, got "${email}"`);
  const bind = text(env, 'BERTH_TLS_BIND', '0.0.0.0');
  const httpsPort = integer(env, 'BERTH_HTTPS_PORT', 443, 1, 65535);
  const httpPort = integer(env, 'BERTH_HTTP_PORT', 80, 1, 65535);
  if (httpsPort === httpPort) throw new ConfigError('BERTH_HTTPS_PORT and BERTH_HTTP_PORT must differ');
  return {
    bind,
    httpsPort,
    httpPort,
    directory,
    email,
    caFile: optionalPath(env, 'BERTH_ACME_CA_FILE'),
    renewCheckMs: integer(env, 'BERTH_TLS_RENEW_CHECK_MS', 3600_000, 100, 24 * 3600_000),
  };
}

function loadLlmConfig(env: NodeJS.ProcessEnv): LlmConfig {
  const provider = text(env, 'BERTH_LLM_PROVIDER', '').toLowerCase();
  if (provider !== '' && provider !== 'openai' && provider !== 'anthropic') {
    throw new ConfigError(
      'BERTH_LLM_PROVIDER must be "openai" (any OpenAI-compatible chat completions API) or "anthropic"',
    );
  }
  const defaults = DEFAULTS.llm;
  const config: LlmConfig = {
    provider,
    baseUrl: text(
      env,
      'BERTH_LLM_BASE_URL',
      provider === 'anthropic' ? 'https://api.anthropic.com' : provider === 'openai' ? 'https://api.openai.com/v1' : '',
    ),
    apiKey: env.BERTH_LLM_API_KEY ?? '',
    models: {
      'model-6-luna': text(env, 'BERTH_LLM_MODEL_LUNA', ''),
      'model-6.1-sol': text(env, 'BERTH_LLM_MODEL_SOL', ''),
    },
    timeoutMs: integer(env, 'BERTH_LLM_TIMEOUT_MS', defaults.timeoutMs, 100, 600_000),
    dailyCalls: integer(env, 'BERTH_LLM_DAILY_CALLS', defaults.dailyCalls, 0, 100_000_000),
  };
  if (provider && (!config.models['model-6-luna'] || !config.models['model-6.1-sol'])) {
    throw new ConfigError(
      'with BERTH_LLM_PROVIDER set, BERTH_LLM_MODEL_LUNA and BERTH_LLM_MODEL_SOL name the provider models to use',
    );
  }
  return config;
}
