// `berth admin backup` and `berth admin restore`: an online backup of a data dir into one archive file,
// and a new data dir rebuilt from one. Passphrases come from stdin (or a hidden prompt), never argv.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type Config, masterKeyFileOf } from '../config.ts';
import { openBlobStore } from '../blob-stores.ts';
import { StorageUnavailableError } from '../../storage/blob-driver.ts';
import { assertEmpty, clearMetadata, copyMetadata } from '../db/copy-metadata.ts';
import { type Metadata, openMetadata } from '../db/metadata.ts';
import { migrationSource } from '../db/migrations.ts';
import { VERSION } from '../version.ts';
import { BerthError } from '../errors.ts';
import { BackupError, MIN_PASSPHRASE_LENGTH, createBackup, restoreBackup } from '../../storage/backup/index.ts';
import { forgetPlacements } from '../services/nodes.ts';
import { CliError } from './cli-error.ts';
import { EXIT } from './exit-codes.ts';
import { formatBytes } from '../format-bytes.ts';
import { ask, readStdin, stdinIsTerminal } from './terminal.ts';

export const BACKUP_USAGE = `Usage:
  berth admin backup <file> --master-key-passphrase-stdin | --without-master-key [--leave-blobs-in-store] [--json]
      an online backup of BERTH_DATA_DIR (metadata, site databases, files, exports) into one file;
      the master key wrapped with a passphrase read from stdin, or left out (keep master.key yourself);
      with an object store, --leave-blobs-in-store lists the files' blobs instead of copying them
  berth admin restore <file> --data-dir <empty dir> [--master-key <file> | --master-key-passphrase-stdin] [--json]
      a new data dir from a backup, checked against its manifest first; all or nothing
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
  });
  const file = onePositional(positionals, 'backup file');
  const leave = values['leave-blobs-in-store'] === true;
  if (leave && !config.objectStore)
    throw new BackupUsageError(
      '--leave-blobs-in-store needs an object store (BERTH_OBJECT_STORE): the blob directory is backed up by copying it',
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
  let report;
  try {
    report = await createBackup({
      dataDir: config.dataDir,
      blobs,
      leaveBlobsInStore: leave,
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
    report.masterKey === 'wrapped'
      ? '  master key: wrapped with your passphrase; a restore asks for it'
      : `  master key: left out; keep ${masterKeyFileOf(config)} safe and apart from this file: a restore needs it (--master-key)`,
  ];
  if (report.deletedDuringBackup.length > 0)
    lines.push(`  site databases deleted while the backup ran, left out: ${report.deletedDuringBackup.join(', ')}`);
  return { json: { backup: report }, text: lines.filter(Boolean).join('\n') };
}

async function restore(config: Config, args: string[]): Promise<Result> {
  const { values, positionals } = parse(args, {
    'data-dir': { type: 'string' },
    'master-key': { type: 'string' },
    'master-key-passphrase-stdin': { type: 'boolean' },
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
    });
    if (target) {
      await moveMetadataInto(target, report.dataDir);
      await forgetPlacements(target.db);
    }
  } finally {
    await target?.close();
    await objectStore?.close();
  }
  const c = report.contents;
  return {
    json: { restore: report },
    text: [
      `Restored ${report.file} (taken ${report.createdAt} by Berth ${report.berthVersion}) into ${report.dataDir}`,
      `  ${c.sites} sites, ${c.fileVersions} file versions in ${c.blobs} blobs, ${c.siteDatabases} site databases, ${c.exports} exports; schema ${report.schema.latest ?? 'empty'}`,
      target ? `  metadata: into ${target.where}` : '',
      objectStore ? `  blobs and exports: in ${objectStore.location}` : '',
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
