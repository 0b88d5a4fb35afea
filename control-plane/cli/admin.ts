// Operator commands. They act on the metadata directly (meta.sqlite in BERTH_DATA_DIR, or the
// PostgreSQL database BERTH_DATABASE_URL names), so they work with or without a running server;
// SQLite's WAL mode and busy timeout, or PostgreSQL's own concurrency, make them safe alongside one.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.ts';
import { openMetadata } from '../db/metadata.ts';
import { BerthError } from '../errors.ts';
import { createAccount } from '../services/accounts.ts';
import { PLANS, type Plan } from '../services/plans.ts';
import { type Store, monotonicClock } from '../deps.ts';
import { createKey, listKeys, revokeKey } from '../services/keys.ts';
import { setStorageLimit } from '../services/storage-quota.ts';
import { type NodeReplication, listNodes } from '../cluster/nodes.ts';
import { formatBytes } from '../format-bytes.ts';
import { SET_PASSWORD_PATH, resetPassword } from '../services/sign-in-links.ts';
import { ROLES, type Role, createUser } from '../services/users.ts';
import { Name } from '../schemas.ts';
import { usePrivateDataDir } from '../../storage/data-dir-privacy.ts';
import { StartupError, dataDirProblem } from '../startup-error.ts';
import { UsageError } from './usage-error.ts';
import { drainNode, recoverDatabase } from './cluster-commands.ts';
import { options, required, uuid } from './admin-options.ts';

type Command = (store: Store, args: string[], config: Config) => Promise<{ json: unknown; text: string }>;

/** Where the server of this data dir is reached, for the links these commands print. */
const serverUrl = (config: Config) =>
  config.publicUrl ||
  `http://${config.bind === '0.0.0.0' || config.bind === '::' ? '127.0.0.1' : config.bind}:${config.port}`;

/** The password piped to stdin, without the newline that ends it. */
async function readPassword(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

const commands: Record<string, Command> = {
  'create-account': async (store, args) => {
    const opts = options(args, { name: { type: 'string' }, plan: { type: 'string' } });
    const name = Name.safeParse(required(opts.name, '--name'));
    if (!name.success) throw new UsageError('--name must be 1–100 characters');
    const plan = (opts.plan ?? 'free') as Plan;
    if (!PLANS.includes(plan)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')}`);
    const account = await createAccount(store, { name: name.data, plan });
    return {
      json: { account: { id: account.id, name: account.name } },
      text: `Created account ${account.id} ("${account.name}", plan ${account.plan})`,
    };
  },
  'create-key': async (store, args) => {
    const opts = options(args, { account: { type: 'string' }, permission: { type: 'string' } });
    const accountId = uuid(opts.account, '--account');
    const permission = required(opts.permission, '--permission');
    if (permission !== 'READ' && permission !== 'WRITE') throw new UsageError('--permission must be READ or WRITE');
    const created = await createKey(store, { accountId, permission });
    return {
      json: { key: created.key, id: created.id },
      text: `Created ${permission} key ${created.id}. Its secret is shown this once only:\n${created.key}`,
    };
  },
  'create-user': async (store, args) => {
    const opts = options(args, {
      email: { type: 'string' },
      account: { type: 'string' },
      role: { type: 'string' },
      'password-stdin': { type: 'boolean' },
    });
    const email = required(opts.email, '--email');
    const accountId = uuid(opts.account, '--account');
    const role = required(opts.role, '--role') as Role;
    if (!ROLES.includes(role)) throw new UsageError(`--role must be ${ROLES.join(' or ')}`);
    if (opts['password-stdin'] !== true)
      throw new UsageError(
        '--password-stdin is required: pipe the password in, so it never appears in the command line',
      );
    const created = await createUser(store, { email, accountId, role, password: await readPassword() });
    return {
      json: created,
      text: `Created user ${created.user.id} (${created.user.email}), ${role} of account ${accountId}`,
    };
  },
  'reset-password': async (store, args, config) => {
    const opts = options(args, { email: { type: 'string' } });
    const { user, token } = await resetPassword(store, required(opts.email, '--email'));
    const link = `${serverUrl(config)}${SET_PASSWORD_PATH}?token=${token}`;
    return { json: { user, link }, text: `${user.email} may set a new password within 24 hours, once, at:\n${link}` };
  },
  'revoke-key': async (store, args) => {
    const opts = options(args, { id: { type: 'string' } });
    const info = await revokeKey(store, uuid(opts.id, '--id'));
    return { json: { revoked: true, id: info.id }, text: `Revoked key ${info.id}` };
  },
  'set-storage-limit': async (store, args, config) => {
    const opts = options(args, { account: { type: 'string' }, bytes: { type: 'string' } });
    const accountId = uuid(opts.account, '--account');
    const raw = required(opts.bytes, '--bytes');
    const bytes = raw === 'default' ? null : Number(raw);
    if (bytes !== null && (!Number.isSafeInteger(bytes) || bytes < 0))
      throw new UsageError('--bytes must be a number of bytes, or "default" for the plan’s limit');
    const usage = await setStorageLimit(store, config, accountId, bytes);
    const limit =
      usage.limitBytes === null
        ? 'no limit'
        : `a limit of ${formatBytes(usage.limitBytes)} (${usage.limitBytes} bytes)`;
    return {
      json: { accountId, storage: usage },
      text: `Account ${accountId} stores ${formatBytes(usage.usedBytes)}, with ${limit}${bytes === null ? ', its plan’s' : ''}`,
    };
  },
  'list-keys': async (store, args) => {
    const opts = options(args, { account: { type: 'string' } });
    const keys = await listKeys(store, uuid(opts.account, '--account'));
    const lines = keys.map(
      (k) =>
        `${k.id}  ${k.permission.padEnd(5)}  created ${k.createdAt}${k.revokedAt ? `  revoked ${k.revokedAt}` : ''}`,
    );
    return { json: { keys }, text: lines.join('\n') || 'no keys' };
  },
  nodes: async (store, args) => {
    options(args, {});
    const listed = await listNodes(store.db);
    // The sites whose databases each node holds, for the JSON form (the text counts them).
    const placed = (await store
      .db('databases')
      .whereNotNull('node_id')
      .orderBy('site_id')
      .select('node_id', 'site_id')) as Array<{ node_id: string; site_id: string }>;
    const nodes = listed.map((node) => ({
      ...node,
      databaseSites: placed.filter((row) => row.node_id === node.id).map((row) => row.site_id),
    }));
    const lines = nodes.map(
      (n) =>
        `${n.id}  ${n.state.padEnd(7)}  ${n.roles.join(',').padEnd(12)}  ${n.address || '(no cluster address)'}  ${n.version}  beat ${n.heartbeatAt}  databases ${n.databases}${n.drainingAt ? `  draining since ${n.drainingAt}` : ''}${replicationText(n.replication)}`,
    );
    return { json: { nodes }, text: lines.join('\n') || 'no node has started on this metadata yet' };
  },
  'drain-node': drainNode,
  'recover-database': recoverDatabase,
};

/** A node's replication in a few words: how many databases it replicates and the most behind. */
function replicationText(replication: NodeReplication | null): string {
  if (!replication) return '';
  if (replication.stalled) return `  replication stalled: ${replication.stalled}`;
  const worst = replication.databases[0];
  return `  replicating ${replication.inUse}${worst && worst.lagMs > 0 ? `, the most behind ${(worst.lagMs / 1000).toFixed(1)} s` : ''}`;
}

const CREATE_FLAG = '--create-data-dir';

/**
 * An admin command acts on the data dir of a server: one that is missing or holds no metadata is a
 * wrong BERTH_DATA_DIR (or working directory), not a new instance, unless the operator says so.
 */
function checkDataDir(dataDir: string, create: boolean): void {
  if (create) return;
  const where = path.resolve(dataDir);
  if (!fs.existsSync(where)) {
    throw new StartupError(
      `there is no data dir at ${where}: set BERTH_DATA_DIR to the server's data dir, or add ${CREATE_FLAG} to make a new one`,
    );
  }
  if (!fs.existsSync(path.join(where, 'meta.sqlite'))) {
    throw new StartupError(
      `${where} holds no Berth data (no meta.sqlite): set BERTH_DATA_DIR to the server's data dir, or add ${CREATE_FLAG} to start one there`,
    );
  }
}

export async function runAdmin(config: Config, argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  // backup reads BERTH_DATA_DIR without creating or migrating anything; restore makes a new data dir.
  if (name === 'backup' || name === 'restore')
    return (await import('./backup.ts')).runBackupCommand(config, name, args);
  if (name === 'copy-metadata' || name === 'copy-blobs') {
    const result =
      name === 'copy-metadata'
        ? await (await import('./copy-metadata.ts')).runCopyMetadata(config, args)
        : await (await import('./copy-blobs.ts')).runCopyBlobs(config, args);
    process.stdout.write(args.includes('--json') ? `${JSON.stringify(result.json)}\n` : `${result.text}\n`);
    return 0;
  }
  const command = name ? commands[name] : undefined;
  if (!command) throw new UsageError(name ? `unknown admin command "${name}"` : 'an admin command is required');
  const json = args.includes('--json');
  const create = args.includes(CREATE_FLAG);
  // On PostgreSQL the metadata is not in the data dir: these commands need it only to start a new instance.
  if (!config.databaseUrl || create) {
    checkDataDir(config.dataDir, create);
    try {
      usePrivateDataDir(config.dataDir);
    } catch (err) {
      throw dataDirProblem(err, config.dataDir);
    }
  }
  const metadata = await openMetadata(config, { create });
  const { db } = metadata;
  try {
    const result = await command(
      { db, now: monotonicClock() },
      args.filter((arg) => arg !== CREATE_FLAG),
      config,
    );
    process.stdout.write(json ? `${JSON.stringify(result.json)}\n` : `${result.text}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof BerthError)) throw err;
    if (json) process.stdout.write(`${JSON.stringify({ error: { code: err.code, message: err.message } })}\n`);
    else process.stderr.write(`berth: ${err.message}\n`);
    return 1;
  } finally {
    await metadata.close();
  }
}
