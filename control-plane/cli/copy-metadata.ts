// `berth admin copy-metadata --to postgres://…`: moves a stopped instance's metadata into an empty
// PostgreSQL database, table by table, and checks each table afterwards; the source is only read.
import type { Config } from '../config.ts';
import { BerthError } from '../errors.ts';
import { copyMetadata } from '../db/copy-metadata.ts';
import { openMetadata } from '../db/metadata.ts';
import { StartupError } from '../startup-error.ts';
import { DataDirInUse, lockDataDir } from '../../storage/data-dir-lock.ts';
import { UsageError, copyTarget } from './usage-error.ts';

export async function runCopyMetadata(config: Config, args: string[]): Promise<{ json: unknown; text: string }> {
  const to = copyTarget(args);
  if (!/^postgres(ql)?:\/\//.test(to)) throw new UsageError('--to must be the postgres:// URL of an empty database');
  if (to === config.databaseUrl)
    throw new UsageError(
      '--to names the database BERTH_DATABASE_URL already uses: the source and the target must differ',
    );

  // A running server would go on writing to what is being copied: it must be stopped.
  let lock;
  try {
    lock = config.databaseUrl ? undefined : lockDataDir(config.dataDir);
  } catch (err) {
    if (err instanceof DataDirInUse)
      throw new StartupError(`${err.message}: stop it first, so that nothing changes while its metadata is copied`);
    throw err;
  }
  try {
    const source = await openMetadata(config, { create: false });
    try {
      const target = await openMetadata({ dataDir: config.dataDir, databaseUrl: to, databasePool: 2 });
      try {
        const tables = await copyMetadata(source.db, target.db);
        const rows = tables.reduce((sum, t) => sum + t.rows, 0);
        return {
          json: { from: source.where, to: target.where, tables },
          text: [
            `Copied the metadata of ${source.where} into ${target.where}: ${tables.length} tables, ${rows} rows, each table's rows checked by count and checksum`,
            ...tables.map(
              (t) => `  ${t.table.padEnd(30)} ${String(t.rows).padStart(8)} rows  sha256 ${t.checksum.slice(0, 16)}`,
            ),
            'The source is unchanged. To switch, start Berth with the same data dir (it keeps the files, site databases and master key) and',
            `  BERTH_DATABASE_URL=${redacted(to)}`,
          ].join('\n'),
        };
      } finally {
        await target.close();
      }
    } finally {
      await source.close();
    }
  } catch (err) {
    if (err instanceof BerthError) throw new StartupError(err.message);
    throw err;
  } finally {
    lock?.release();
  }
}

/** The URL with its password replaced, for printing. */
function redacted(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = 'PASSWORD';
  return parsed.toString();
}
