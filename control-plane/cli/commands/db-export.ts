// `berth db export`: an SQL dump of the site database, started on the server, waited for, and saved.
import fs from 'node:fs';
import { rm, rename } from 'node:fs/promises';
import { CliError } from '../cli-error.ts';
import type { CommandDefinition } from '../command.ts';
import { siteDatabase } from '../database.ts';
import { formatBytes } from '../../format-bytes.ts';

interface DatabaseExport {
  id: string;
  status: 'PROCESSING' | 'COMPLETE' | 'ERROR';
  bytes: number | null;
  error: string | null;
  downloadUrl?: string;
}

const POLL_MS = 500;

const defaultFile = (subdomain: string) =>
  `${subdomain}-${new Date()
    .toISOString()
    .replace(/\.\d+Z$/, '')
    .replace(/[-:]/g, '')
    .replace('T', '-')}.sql`;

export const dbExportCommand: CommandDefinition = {
  usage: 'export',
  summary: 'dump the site database as SQL into a local file (it loads into sqlite3)',
  examples: [
    'berth db export --site hello',
    'berth db export --site hello --out backup.sql && sqlite3 copy.db < backup.sql',
  ],
  site: true,
  options: [{ flags: '-o, --out <file>', description: 'where to save the dump (default <subdomain>-<time>.sql here)' }],
  async run({ options, out, api, site }) {
    const client = api();
    const target = await site();
    const { database } = await siteDatabase(client, target);
    const base = `sites/${target.id}/databases/${database.id}/exports`;
    let { export: current } = await client.post<{ export: DatabaseExport }>(base);

    const started = Date.now();
    out.note(`exporting the database of ${target.subdomain}…`);
    while (current.status === 'PROCESSING') {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      out.status(`exporting… ${Math.round((Date.now() - started) / 1000)} s`);
      ({ export: current } = await client.post<{ export: DatabaseExport }>(`${base}/${current.id}/reconcile`));
    }
    if (current.status === 'ERROR' || !current.downloadUrl) {
      throw new CliError(`the export failed: ${current.error ?? 'no reason given'}`, { code: 'export_failed' });
    }

    const file = typeof options.out === 'string' ? options.out : defaultFile(target.subdomain);
    // Written aside and renamed, so that `file` is never a partial dump.
    const partial = `${file}.partial`;
    try {
      await client.download(current.downloadUrl, fs.createWriteStream(partial));
      await rename(partial, file);
    } finally {
      await rm(partial, { force: true });
    }
    const bytes = fs.statSync(file).size;
    out.print(
      { exportId: current.id, file, bytes },
      `Saved the database of ${target.subdomain} to ${file} (${formatBytes(bytes)})`,
    );
  },
};
