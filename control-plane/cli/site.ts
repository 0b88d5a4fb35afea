// `--site` takes a site id or a subdomain of the key's account.
import type { ApiClient } from './api-client.ts';
import { ApiError, CliError } from './cli-error.ts';

export interface Site {
  id: string;
  name: string;
  subdomain: string;
  url: string;
  bucketId: string;
  status: 'ACTIVE' | 'ARCHIVED';
  access: 'PUBLIC' | 'PRIVATE';
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function resolveSite(api: ApiClient, ref: string): Promise<Site> {
  if (UUID.test(ref)) {
    try {
      return await api.get<Site>(`sites/${ref}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) throw unknownSite(`no site with id ${ref}`);
      throw err;
    }
  }
  const account = await api.get<{ id: string }>('accounts/current');
  const { sites } = await api.get<{ sites: Site[] }>('sites', { accountId: account.id, subdomain: ref, limit: 1 });
  if (!sites[0]) throw unknownSite(`no site with subdomain "${ref}"`);
  return sites[0];
}

const unknownSite = (what: string) =>
  new CliError(`${what} in the account of BERTH_API_KEY`, {
    code: 'site_not_found',
    hint: '--site takes a site id or its subdomain, as the API returned them.',
  });
