// `berth admin backup` and `berth admin restore`: an online backup of a data dir into one archive file,
// and a new data dir rebuilt from one. Passphrases come from stdin (or a hidden prompt), never argv.
// The archive carries the site databases' replicas kept in a folder, or points at the object store
// that keeps them; a restore then brings each database to the latest state its replica holds
// (replication/restored-databases.ts), a step of the control plane's after storage's restore.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type Config, masterKeyFileOf, replicaDirOf } from '../config.ts';
import { openBlobStore } from '../blob-stores.ts';
import { StorageUnavailableError } from '../../storage/blob-driver.ts';
import { assertEmpty, clearMetadata, copyMetadata } from '../db/copy-metadata.ts';
import { type Metadata, openMetadata } from '../db/metadata.ts';
import { migrationSource } from '../db/migrations.ts';
import { VERSION } from '../version.ts';
import { BerthError } from '../errors.ts';
import {
  BackupError,
  type BackupOptions,
  MIN_PASSPHRASE_LENGTH,
  type ReplicasRecord,
  addReplicaFolder,
  createBackup,
  restoreBackup,
} from '../../storage/backup/index.ts';
import { replicationTiming } from '../site-databases/compose.ts';
import type { ReplicaTarget } from '../site-databases/replication/litestream.ts';
import { type LatestOutcome, bringToLatest } from '../site-databases/replication/restored-databases.ts';
import { forgetPlacements } from '../cluster/nodes.ts';
import { CliError } from './cli-error.ts';
import { EXIT } from './exit-codes.ts';
import { formatBytes } from '../format-bytes.ts';
import { ask, readStdin, stdinIsTerminal } from './terminal.ts';

export const BACKUP_USAGE = `Usage:
  berth admin backup <file> --master-key-passphrase-stdin | --without-master-key [--leave-blobs-in-store]
                    [--without-replicas] [--json]
      an online backup of BERTH_DATA_DIR (metadata, site databases, files, exports, the databases'
      replicas when they are in a folder) into one file; the master key wrapped with a passphrase read
      from stdin, or left out (keep master.key yourself); with an object store, --leave-blobs-in-store
      lists the files' blobs instead of copying them (the replicas stay there in any case);
      --without-replicas leaves a replica folder out
  berth admin restore <file> --data-dir <empty dir> [--master-key <file> | --master-key-passphrase-stdin]
                     [--as-archived] [--json]
      a new data dir from a backup, checked against its manifest first; all or nothing; then each site
      database is brought to the latest state its replica holds, unless --as-archived
See docs/backup.md.
`;

class BackupUsageError extends Error {}

function parse(
  args: string[],
  options: Record<string, { type: 'string' | 'boolean' }>,
): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  try {
    return parseArgs({
      args,
      options: { ...options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    throw new BackupUsageError((err as Error).message);
  }
}

function onePositional(positionals: string[], what: string): string {
  if (positionals.length === 0) throw new BackupUsageError(`the ${what} is required`);
  if (positionals.length > 1) throw new BackupUsageError(`one ${what} only, got: ${positionals.join(' ')}`);
  return positionals[0]!;
}

/** The passphrase piped to stdin without the newline that ends it, or asked for on a terminal. */
async function passphrase(confirm: boolean): Promise<string> {
  let value: string;
  if (stdinIsTerminal()) {
    value = await ask('Passphrase for the master key (not shown): ', { hidden: true });
    if (confirm && (await ask('The same passphrase again: ', { hidden: true })) !== value)
      throw new BackupUsageError('the two passphrases differ');
  } else {
    value = (await readStdin()).replace(/\r?\n$/, '');
  }
  if (value === '')
    throw new BackupUsageError(
      'no passphrase on stdin: pipe it in, e.g. berth admin backup <file> --master-key-passphrase-stdin < /path/to/passphrase',
    );
  return value;
}

type Result = { json: unknown; text: string };

/**
 * The restored meta.sqlite into the (empty) PostgreSQL metadata, then out of the data dir, where a
 * start without BERTH_DATABASE_URL would take it for the instance's. A failed copy is undone on both
 * sides: the rows it wrote, and the restored data dir.
 */
async function moveMetadataInto(target: Metadata, dataDir: string): Promise<void> {
  try {
    const restored = await openMetadata({ dataDir, databaseUrl: '', databasePool: 1 }, { create: false });
    try {
      await copyMetadata(restored.db, target.db);
    } finally {
      await restored.close();
    }
  } catch (err) {
    await clearMetadata(target.db);
    await fsp.rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  for (const name of ['meta.sqlite', 'meta.sqlite-wal', 'meta.sqlite-shm'])
    await fsp.rm(path.join(dataDir, name), { force: true });
}

/** The PostgreSQL metadata, from one snapshot, as a SQLite file of the same schema (what an archive holds). */
async function metadataAsSqlite(config: Config, target: string) {
  const source = await openMetadata(config, { create: false });
  try {
    const copy = await openMetadata({ dataDir: path.dirname(target), databaseUrl: '', databasePool: 1 });
    try {
      await copyMetadata(source.db, copy.db);
    } finally {
      await copy.close();
    }
  } finally {
    await source.close();
  }
  return { pages: 0, restarts: 0, wholeStep: true };
}

async function backup(config: Config, args: string[]): Promise<Result> {
  const { values, positionals } = parse(args, {
    'without-master-key': { type: 'boolean' },
    'master-key-passphrase-stdin': { type: 'boolean' },
    'leave-blobs-in-store': { type: 'boolean' },
    'without-replicas': { type: 'boolean' },
  });
  const file = onePositional(positionals, 'backup file');
  const leave = values['leave-blobs-in-store'] === true;
  if (leave && !config.objectStore)
    throw new BackupUsageError(
      '--leave-blobs-in-store needs an object store (BERTH_OBJECT_STORE): the blob directory is backed up by copying it',
    );
  const withoutReplicas = values['without-replicas'] === true;
  if (withoutReplicas && config.objectStore)
    throw new BackupUsageError(
      '--without-replicas is for replicas in a folder: with an object store (BERTH_OBJECT_STORE) they stay in it, and the backup only says where',
    );
  const wrap = values['master-key-passphrase-stdin'] === true;
  const omit = values['without-master-key'] === true;
  if (wrap && omit)
    throw new BackupUsageError('--master-key-passphrase-stdin and --without-master-key exclude each other');
  if (!wrap && !omit) {
    throw new BackupUsageError(
      'say what to do with the master key, which decrypts the secrets: --master-key-passphrase-stdin wraps it with a passphrase read from stdin, --without-master-key leaves it out (then keep master.key safely yourself: a restore needs it)',
    );
  }
  let masterKey: { mode: 'omitted' } | { mode: 'wrapped'; passphrase: string } = { mode: 'omitted' };
  if (wrap) {
    const phrase = await passphrase(true);
    if ([...phrase].length < MIN_PASSPHRASE_LENGTH)
      throw new BackupUsageError(
        `the passphrase must be at least ${MIN_PASSPHRASE_LENGTH} characters: the wrapped key is only as strong as it`,
      );
    masterKey = { mode: 'wrapped', passphrase: phrase };
  }
  const blobs = openBlobStore(config);
  const store = config.objectStore;
  const replicas: BackupOptions['replicas'] = !config.databaseReplication
    ? undefined
    : store
      ? {
          objectStore: {
            bucket: store.bucket,
            prefix: store.prefix,
            region: store.region,
            forcePathStyle: store.forcePathStyle,
            ...(store.endpoint ? { endpoint: store.endpoint } : {}),
          },
        }
      : { folder: path.resolve(replicaDirOf(config)), carry: !withoutReplicas };
  let report;
  try {
    report = await createBackup({
      dataDir: config.dataDir,
      blobs,
      leaveBlobsInStore: leave,
      ...(replicas ? { replicas } : {}),
      masterKeyFile: masterKeyFileOf(config),
      ...(config.databaseUrl ? { copyMetadata: (target: string) => metadataAsSqlite(config, target) } : {}),
      file,
      berthVersion: VERSION,
      masterKey,
    });
  } finally {
    await blobs.close();
  }
  const c = report.contents;
  const lines = [
    `Backed up ${config.dataDir} to ${report.file} (${formatBytes(report.bytes)}, sha256 ${report.sha256})`,
    `  ${c.sites} sites, ${c.fileVersions} file versions in ${c.blobs} blobs, ${c.siteDatabases} site databases, ${c.exports} exports; schema ${report.schema.latest ?? 'empty'}`,
    leave ? `  blobs: left in ${blobs.location}, each checked present; a restore needs that store` : '',
    `  database replicas: ${replicasLine(report.replicas, report.replicaFiles)}`,
    report.masterKey === 'wrapped'
      ? '  master key: wrapped with your passphrase; a restore asks for it'
      : `  master key: left out; keep ${masterKeyFileOf(config)} safe and apart from this file: a restore needs it (--master-key)`,
  ];
  if (report.deletedDuringBackup.length > 0)
    lines.push(`  site databases deleted while the backup ran, left out: ${report.deletedDuringBackup.join(', ')}`);
  return { json: { backup: report }, text: lines.filter(Boolean).join('\n') };
}

/** Where a backup found the replicas, for its report. */
function replicasLine(replicas: ReplicasRecord | null, files: number): string {
  if (!replicas) return 'none (BERTH_DATABASE_REPLICATION is off)';
  if ('objectStore' in replicas)
    return `left in ${replicasInStore(replicas.objectStore)}; a restore brings the databases forward from there`;
  return replicas.carried
    ? `${files} files from ${replicas.folder}, carried`
    : `left out (--without-replicas); they stay in ${replicas.folder}`;
}

const replicasInStore = (store: { bucket: string; prefix: string }) =>
  `s3://${store.bucket}/${store.prefix}database-replicas/`;

/**
 * Each restored site database brought to its replica's latest state when that is later than the
 * archive's: from the object store the backup points at, or from the replica folder of the restored
 * instance (the carried files, and BERTH_DATABASE_REPLICA_DIR's own). A replica folder the backup
 * names that is still there (a restore on the same machine, or its disk survived) holds what was
 * replicated after the backup: its files are added to the restored folder first.
 */
async function databasesToLatest(
  config: Config,
  report: Awaited<ReturnType<typeof restoreBackup>>,
  replicaDir: string,
): Promise<{ outcomes: LatestOutcome[]; added: number }> {
  const replicas = report.replicas!;
  const outcomes: LatestOutcome[] = [];
  let databases = report.siteDatabases;
  let added = 0;
  if ('folder' in replicas && path.resolve(replicas.folder) !== replicaDir && fs.existsSync(replicas.folder)) {
    databases = [];
    for (const database of report.siteDatabases) {
      try {
        added += await addReplicaFolder(
          path.join(replicas.folder, database.siteId),
          path.join(replicaDir, database.siteId),
        );
        databases.push(database);
      } catch (err) {
        const why = `its replica in ${replicas.folder} could not be read: ${(err as Error).message}`;
        outcomes.push({ siteId: database.siteId, used: 'archive', why });
      }
    }
  }
  const target: ReplicaTarget =
    'objectStore' in replicas ? { kind: 's3', ...replicas.objectStore } : { kind: 'dir', dir: replicaDir };
  const workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'berth-restore-replicas-'));
  try {
    outcomes.push(
      ...(await bringToLatest({
        dataDir: report.dataDir,
        databases,
        target,
        timing: replicationTiming(config),
        workDir,
      })),
    );
  } finally {
    await fsp.rm(workDir, { recursive: true, force: true });
  }
  return { outcomes, added };
}

async function restore(config: Config, args: string[]): Promise<Result> {
  const { values, positionals } = parse(args, {
    'data-dir': { type: 'string' },
    'master-key': { type: 'string' },
    'master-key-passphrase-stdin': { type: 'boolean' },
    'as-archived': { type: 'boolean' },
  });
  const file = onePositional(positionals, 'backup file');
  const dataDir = values['data-dir'];
  if (typeof dataDir !== 'string' || dataDir.trim() === '')
    throw new BackupUsageError('--data-dir <empty dir> is required: the new data dir to restore into');
  const keyFile = values['master-key'];
  const wrap = values['master-key-passphrase-stdin'] === true;
  if (typeof keyFile === 'string' && wrap)
    throw new BackupUsageError('--master-key and --master-key-passphrase-stdin exclude each other');
  const masterKey =
    typeof keyFile === 'string' ? { file: keyFile } : wrap ? { passphrase: await passphrase(false) } : null;
  // With BERTH_DATABASE_URL, the metadata goes into that database: it must be empty before anything is restored.
  const target = config.databaseUrl ? await openMetadata(config) : undefined;
  // With BERTH_OBJECT_STORE, the blobs and exports go into that store.
  const objectStore = config.objectStore ? openBlobStore(config) : undefined;
  // Carried replicas go where the restored instance will keep its replicas.
  const replicaDir = path.resolve(
    config.databaseReplicaDir || replicaDirOf({ dataDir: path.resolve(dataDir), databaseReplicaDir: '' }),
  );
  const asArchived = values['as-archived'] === true;
  let report;
  try {
    if (target)
      await assertEmpty(target.db).catch((err: Error) =>
        Promise.reject(new BackupError('target_not_empty', `${target.where}: ${err.message}; nothing was restored`)),
      );
    report = await restoreBackup({
      file,
      dataDir,
      knownMigrations: await migrationSource.getMigrations([]),
      masterKey,
      ...(objectStore ? { objectStore } : {}),
      replicaDir,
    });
    if (target) {
      await moveMetadataInto(target, report.dataDir);
      await forgetPlacements(target.db);
    }
  } finally {
    await target?.close();
    await objectStore?.close();
  }
  // The restored instance is whole as archived; from here on a replica only brings a database forward.
  const { outcomes, added } =
    report.replicas && !asArchived && report.siteDatabases.length > 0
      ? await databasesToLatest(config, report, replicaDir)
      : { outcomes: [], added: 0 };
  const databases = report.siteDatabases.map((database) => ({
    ...database,
    ...(outcomes.find((o) => o.siteId === database.siteId) ?? {
      used: 'archive' as const,
      why: asArchived ? '--as-archived' : 'the backup records no replicas',
    }),
  }));
  const c = report.contents;
  return {
    json: { restore: { ...report, siteDatabases: databases } },
    text: [
      `Restored ${report.file} (taken ${report.createdAt} by Berth ${report.berthVersion}) into ${report.dataDir}`,
      `  ${c.sites} sites, ${c.fileVersions} file versions in ${c.blobs} blobs, ${c.siteDatabases} site databases, ${c.exports} exports; schema ${report.schema.latest ?? 'empty'}`,
      target ? `  metadata: into ${target.where}` : '',
      objectStore ? `  blobs and exports: in ${objectStore.location}` : '',
      report.replicaDir ? `  database replicas: carried ones put in ${report.replicaDir}` : '',
      added > 0 && report.replicas && 'folder' in report.replicas
        ? `  database replicas: ${added} files added from ${report.replicas.folder}, where they still are`
        : '',
      ...databases.map((d) =>
        d.used === 'replica'
          ? `  site ${d.siteId} database: latest replicated at ${d.replicatedAt}`
          : `  site ${d.siteId} database: as archived (${d.snapshotAt}): ${d.why}`,
      ),
      `Start it with: BERTH_DATA_DIR=${report.dataDir}${target ? ' BERTH_DATABASE_URL=…' : ''} npx berth serve`,
    ]
      .filter(Boolean)
      .join('\n'),
  };
}

/** Runs `berth admin backup|restore …`; prints the answer or one line of error, and returns the exit code. */
export async function runBackupCommand(config: Config, name: 'backup' | 'restore', args: string[]): Promise<number> {
  const json = args.includes('--json');
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(BACKUP_USAGE);
    return EXIT.OK;
  }
  // Whatever this makes (copies, the archive, a restored data dir) is private to this user.
  process.umask(0o077);
  try {
    const result = name === 'backup' ? await backup(config, args) : await restore(config, args);
    process.stdout.write(json ? `${JSON.stringify(result.json)}\n` : `${result.text}\n`);
    return EXIT.OK;
  } catch (err) {
    if (err instanceof BackupUsageError) {
      process.stderr.write(`berth: ${err.message}\n\n${BACKUP_USAGE}`);
      return EXIT.USAGE;
    }
    const errno = (err as NodeJS.ErrnoException | null)?.code;
    // A disk full, a folder not writable: the operator's to fix, shown as Node words it.
    const code =
      err instanceof BackupError || err instanceof CliError || err instanceof BerthError
        ? err.code
        : err instanceof StorageUnavailableError
          ? 'storage_unavailable'
          : typeof errno === 'string' && /^E[A-Z]+$/.test(errno)
            ? errno.toLowerCase()
            : null;
    if (code === null) throw err;
    const message = (err as Error).message;
    if (json) process.stdout.write(`${JSON.stringify({ error: { code, message } })}\n`);
    else process.stderr.write(`berth: ${message}\n`);
    return EXIT.FAILED;
  }
}
