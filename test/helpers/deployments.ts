// Deployments of inline files through the API, as the tests of previews and of a site's past make
// them: declared with their text (nothing left to upload), then published.
import { type TestAccount, json } from './berth.ts';

/** A deployment as these tests read it. */
export interface Deployment {
  id: string;
  shortId: string;
  status: string;
  seq: number | null;
  publishedAt: string | null;
  previewUrl: string;
  missing: string[];
  previewAccess: 'PRIVATE' | 'PUBLIC';
  previewSecrets: boolean;
  purgedFiles: number;
  fileList: Array<{ path: string; versionId: string | null; purged: boolean }>;
}

/** The content type a test file is declared with, by its extension. */
export const typeOf = (path: string): string =>
  path.endsWith('.html') ? 'text/html' : path.endsWith('.ts') ? 'text/typescript' : 'text/plain';

/** Declares a deployment of inline files. */
export async function createDeployment(
  account: TestAccount,
  siteId: string,
  files: Record<string, string>,
  prune = false,
): Promise<Deployment> {
  const res = await account.api.post(`v0/sites/${siteId}/deployments`, {
    json: {
      files: Object.entries(files).map(([path, content]) => ({ path, content, contentType: typeOf(path) })),
      prune,
    },
  });
  if (res.statusCode !== 201) throw new Error(`create: ${res.statusCode} ${JSON.stringify(res.body)}`);
  return json<{ deployment: Deployment }>(res).deployment;
}

/** Declares and publishes a deployment of inline files; throws unless it was published. */
export async function deployFiles(
  account: TestAccount,
  siteId: string,
  files: Record<string, string>,
  prune = false,
): Promise<Deployment> {
  const created = await createDeployment(account, siteId, files, prune);
  const published = await account.api.post(`v0/sites/${siteId}/deployments/${created.id}/publish`);
  if (published.statusCode !== 200)
    throw new Error(`publish: ${published.statusCode} ${JSON.stringify(published.body)}`);
  return json<{ deployment: Deployment }>(published).deployment;
}
