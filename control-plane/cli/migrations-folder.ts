// The migrations of a project: `migrations/NNNN_description.sql`, in the order of their numbers.
import fs from 'node:fs/promises';
import path from 'node:path';
import { CliError } from './cli-error.ts';

// The API's naming rule, checked here so that a misnamed file is named before anything is sent.
const MIGRATION_NAME = /^\d{4}_[A-Za-z0-9_-]+\.sql$/;

export interface Migration {
  name: string;
  sql: string;
}

/** Reads `<dir>/migrations`, or `<dir>` itself when it holds the .sql files. */
export async function readMigrations(dir: string): Promise<{ folder: string; migrations: Migration[] }> {
  const nested = path.join(dir, 'migrations');
  const folder = (await isDirectory(nested)) ? nested : dir;
  if (!(await isDirectory(folder))) throw new CliError(`${dir} is not a folder`, { code: 'not_a_folder' });
  const names = (await fs.readdir(folder)).filter((name) => name.endsWith('.sql'));
  const misnamed = names.filter((name) => !MIGRATION_NAME.test(name));
  if (misnamed.length > 0) {
    throw new CliError(
      `${misnamed.map((n) => path.join(folder, n)).join(', ')}: migration files are named NNNN_description.sql, such as 0002_add_notes.sql`,
      {
        code: 'invalid_migration_name',
      },
    );
  }
  if (names.length === 0)
    throw new CliError(`no migrations in ${folder}: expected files named NNNN_description.sql`, {
      code: 'no_migrations',
    });
  // The API wants the history in ascending order, sorted as JavaScript sorts strings.
  const migrations = await Promise.all(
    names.sort().map(async (name) => ({ name, sql: await fs.readFile(path.join(folder, name), 'utf8') })),
  );
  return { folder, migrations };
}

async function isDirectory(dir: string): Promise<boolean> {
  try {
    return (await fs.stat(dir)).isDirectory();
  } catch {
    return false;
  }
}
