// `berth db migrate`, `berth db restore` and `berth db delete`: the site database's schema from a folder
// of migrations, its return to an earlier moment, and its deletion through the API's two-step challenge.
import { ApiError, CliError } from '../cli-error.ts';
import type { CommandDefinition } from '../command.ts';
import { siteDatabase } from '../database.ts';
import { readMigrations } from '../migrations-folder.ts';
import { momentOf } from '../moments.ts';
import { ask, stdinIsTerminal } from '../terminal.ts';
import { UsageError } from '../usage-error.ts';

export const dbMigrateCommand: CommandDefinition = {
  usage: 'migrate <dir>',
  summary: 'apply the migrations of <dir>/migrations (or of <dir>) that the site database has not applied yet',
  examples: ['berth db migrate . --site hello', 'berth db migrate ./migrations --site hello --json'],
  site: true,
  async run({ args, out, api, site }) {
    const { folder, migrations } = await readMigrations(args[0]!);
    const client = api();
    const target = await site();
    const { database, created } = await siteDatabase(client, target, { create: true });
    if (created) out.note(`created the database of ${target.subdomain}`);
    let answer: { appliedNames: string[] };
    try {
      // The whole history goes every time: the API checks it against its ledger and applies the rest.
      answer = await client.post(`sites/${target.id}/databases/${database.id}/migrations/apply`, {
        migrations,
        confirm: true,
      });
    } catch (err) {
      const before = err instanceof ApiError ? err.details?.appliedNames : undefined;
      if (Array.isArray(before) && before.length > 0) out.note(`applied before the failure: ${before.join(', ')}`);
      throw err;
    }
    const { appliedNames } = answer;
    const text =
      appliedNames.length > 0
        ? appliedNames.map((name) => `applied ${name}`).join('\n')
        : `${target.subdomain}'s database is up to date: the ${migrations.length} migration${migrations.length === 1 ? '' : 's'} of ${folder} ${migrations.length === 1 ? 'was' : 'were'} applied before`;
    out.print(
      { databaseId: database.id, createdDatabase: created, migrations: migrations.map((m) => m.name), appliedNames },
      text,
    );
  },
};

export const dbRestoreCommand: CommandDefinition = {
  usage: 'restore',
  summary:
    'put the site database back as it was at a moment, after a confirmation (the moment before stays restorable)',
  examples: ['berth db restore --at 10m --site hello', 'berth db restore --at 2026-11-26T09:30:00Z --site hello --yes'],
  site: true,
  options: [
    { flags: '--at <time>', description: 'an RFC 3339 time, or how long ago (10m, 2h, 3d)' },
    { flags: '-y, --yes', description: 'confirm without being asked (for scripts)' },
  ],
  async run({ options, out, api, site }) {
    if (typeof options.at !== 'string')
      throw new UsageError('say which moment with --at (10m, 2h, or an RFC 3339 time)');
    const at = momentOf(options.at, '--at');
    const client = api();
    const target = await site();
    const { database } = await siteDatabase(client, target);
    const base = `sites/${target.id}/databases/${database.id}`;
    if (options.yes !== true) {
      if (!stdinIsTerminal())
        throw new UsageError('restoring a database needs a confirmation: run it at a terminal, or pass --yes');
      const typed = await ask(
        `Restore the database of ${target.subdomain} to ${at}? What was written after it is replaced (the state before the restore stays restorable).\nType the subdomain (${target.subdomain}) to confirm: `,
      );
      if (typed.trim() !== target.subdomain)
        throw new CliError('not restored: the confirmation did not match', { code: 'cancelled' });
    }
    const answer = await client.post<{ restoredTo: string; restoredFrom: string }>(`${base}/restore`, { at });
    out.print(
      answer,
      `Restored the database of ${target.subdomain} to ${answer.restoredTo}\nto undo: berth db restore --at ${answer.restoredFrom} --site ${target.subdomain}`,
    );
  },
};

export const dbDeleteCommand: CommandDefinition = {
  usage: 'delete',
  summary: 'delete the site database for good, after a confirmation (the site and its files stay)',
  examples: ['berth db delete --site hello', 'berth db delete --site hello --yes   # in scripts: no question asked'],
  site: true,
  options: [{ flags: '-y, --yes', description: 'confirm without being asked (for scripts)' }],
  async run({ options, out, api, site }) {
    const client = api();
    const target = await site();
    const { database } = await siteDatabase(client, target);
    if (options.yes !== true) {
      if (!stdinIsTerminal())
        throw new UsageError('deleting a database needs a confirmation: run it at a terminal, or pass --yes');
      const typed = await ask(
        `Delete the database of ${target.subdomain} for good? Its tables and rows cannot be recovered.\nType the subdomain (${target.subdomain}) to confirm: `,
      );
      if (typed.trim() !== target.subdomain)
        throw new CliError('not deleted: the confirmation did not match', { code: 'cancelled' });
    }
    const base = `sites/${target.id}/databases/${database.id}`;
    const { confirmationCode } = await client.post<{ confirmationCode: string }>(`${base}/deletion-challenges`);
    const answer = await client.delete<{ deleted: true; databaseId: string }>(base, { confirmationCode });
    out.print(answer, `Deleted the database of ${target.subdomain} (${database.id})`);
  },
};
