// A site has at most one database; the db commands find it, and `db migrate` creates it when missing.
import type { ApiClient } from './api-client.ts';
import { CliError } from './cli-error.ts';
import type { Site } from './site.ts';

export interface Database {
  id: string;
  status: string;
}

export async function siteDatabase(
  api: ApiClient,
  site: Site,
  options: { create?: boolean } = {},
): Promise<{ database: Database; created: boolean }> {
  const { databases } = await api.get<{ databases: Database[] }>(`sites/${site.id}/databases`, { limit: 1 });
  if (databases[0]) return { database: databases[0], created: false };
  if (!options.create) {
    throw new CliError(`site ${site.subdomain} has no database`, {
      code: 'no_database',
      hint: '`berth db migrate <dir> --site <site>` creates it and applies the migrations.',
    });
  }
  const { database } = await api.post<{ database: Database }>(`sites/${site.id}/databases`);
  return { database, created: true };
}
