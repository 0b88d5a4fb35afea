// Which deployment a command names: its id or the short id people see in previews and listings; and
// which one `berth rollback` without an argument goes back to.
import type { ApiClient } from '../api-client.ts';
import { ApiError, CliError } from '../cli-error.ts';
import type { Site } from '../site.ts';
import type { Deployment } from './deployment.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const notFound = (site: Site, ref: string) =>
  new CliError(`no deployment ${ref} on ${site.subdomain}`, {
    code: 'deployment_not_found',
    hint: `\`berth deployments ls --site ${site.subdomain}\` lists them, with their ids.`,
  });

/** Every deployment of the site, newest first. */
async function allDeployments(api: ApiClient, site: Site): Promise<Deployment[]> {
  const list: Deployment[] = [];
  for await (const deployment of api.list<Deployment>(`sites/${site.id}/deployments`, 'deployments'))
    list.push(deployment);
  return list;
}

export async function findDeployment(api: ApiClient, site: Site, ref: string): Promise<Deployment> {
  if (UUID.test(ref)) {
    try {
      return (await api.get<{ deployment: Deployment }>(`sites/${site.id}/deployments/${ref}`)).deployment;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) throw notFound(site, ref);
      throw err;
    }
  }
  const found = (await allDeployments(api, site)).find((d) => d.shortId === ref.toLowerCase());
  if (!found) throw notFound(site, ref);
  return found;
}

const WHOLE_SITE = new Set(['DEPLOY', 'PROMOTE', 'RESTORE']);

/**
 * What `berth rollback` goes back to: the site as it was just before the deployment whose files it
 * serves now. That is the newest DEPLOY, PROMOTE or RESTORE; a PROMOTE serves what its source made,
 * and a RESTORE what was live at its instant, so those are followed back to the change that made the
 * files. The answer is the published entry before that change (a file API write included), so each
 * rollback goes one deployment further back instead of undoing the previous rollback.
 */
export async function previousDeployment(
  api: ApiClient,
  site: Site,
): Promise<{ target: Deployment; undone: Deployment }> {
  const published = (await allDeployments(api, site))
    .filter((d) => d.status === 'PUBLISHED' && d.publishedAt !== null)
    .sort((a, b) => a.publishedAt!.localeCompare(b.publishedAt!) || a.createdAt.localeCompare(b.createdAt));
  const latest = published.findLast((d) => WHOLE_SITE.has(d.kind));
  if (!latest)
    throw new CliError(`${site.subdomain} has no deployment to roll back`, {
      code: 'nothing_to_roll_back',
      hint: 'Give a deployment (`berth rollback <id>`) or an instant (`--to <time>`).',
    });
  let origin: Deployment | undefined = latest;
  for (;;) {
    const at: number = published.indexOf(origin!);
    const next: Deployment | undefined =
      origin!.kind === 'PROMOTE'
        ? published.find((d) => d.id === origin!.sourceDeploymentId)
        : origin!.kind === 'RESTORE'
          ? published.slice(0, at).findLast((d) => d.publishedAt! <= origin!.restoredAt!)
          : origin;
    if (next === origin) break;
    if (!next) {
      origin = undefined;
      break;
    }
    origin = next;
  }
  const before = origin ? published[published.indexOf(origin) - 1] : undefined;
  if (!before)
    throw new CliError(
      `nothing before ${latest.shortId} to roll back to: it serves the start of ${site.subdomain}'s history`,
      {
        code: 'nothing_to_roll_back',
        hint: 'An earlier state of the site is not in its history; `berth deployments ls` lists what is.',
      },
    );
  return { target: before, undone: latest };
}
