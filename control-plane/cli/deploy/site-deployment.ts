// One deployment of a site's files (web/, api/, cron/, lib/, deno.json and deno.lock): the whole set
// declared by digest, the bytes the server asks for uploaded a few at a time, then published in one
// step (or left for later, for a preview). A function that does not compile fails the deployment with nothing about the site changed.
import fs from 'node:fs';
import type { ApiClient } from '../api-client.ts';
import { ApiError } from '../cli-error.ts';
import type { Site } from '../site.ts';
import type { Deployment, DeploymentDetail, FileProblem } from './deployment.ts';
import { type FileFailure, fileFailure } from './file-failure.ts';
import { CONCURRENT_UPLOADS, eachLimited } from './lanes.ts';

export interface DeclaredFile {
  path: string;
  sha256: string;
  size: number;
  contentType: string;
  /** Where to read its bytes; none for a file the site holds already (kept from a folder the project lacks). */
  absolute?: string;
}

export interface DeploymentProgress {
  created(deployment: Deployment, missing: number, files: number): void;
  uploaded(path: string, bytes: number, count: number, total: number): void;
  failed(path: string, error: { code: string; message: string }, count: number, total: number): void;
}

export interface DeploymentRun {
  /** The deployment as the API last answered it: PUBLISHED, FAILED, or UPLOADING when not published. */
  deployment: DeploymentDetail;
  /** The bytes sent, one entry per digest the server asked for. */
  uploaded: Array<{ path: string; sha256: string; bytes: number }>;
  failed: FileFailure[];
  /** Why publishing failed: each source's problem. */
  errors: FileProblem[];
}

export async function runDeployment(
  api: ApiClient,
  site: Site,
  input: { files: DeclaredFile[]; prune: boolean; message?: string; publish: boolean; progress: DeploymentProgress },
): Promise<DeploymentRun> {
  const base = `sites/${site.id}/deployments`;
  const { deployment: created } = await api.post<{ deployment: Deployment & { missing: string[] } }>(base, {
    files: input.files.map(({ path, sha256, size, contentType }) => ({ path, sha256, size, contentType })),
    prune: input.prune,
    ...(input.message !== undefined ? { message: input.message } : {}),
  });
  const at = `${base}/${created.id}`;
  input.progress.created(created, created.missing.length, input.files.length);

  const bySha = new Map<string, DeclaredFile>();
  for (const file of input.files) if (file.absolute && !bySha.has(file.sha256)) bySha.set(file.sha256, file);
  const run: Omit<DeploymentRun, 'deployment'> = { uploaded: [], failed: [], errors: [] };
  let count = 0;
  await eachLimited(created.missing, CONCURRENT_UPLOADS, async (sha256) => {
    const file = bySha.get(sha256);
    if (!file) {
      // A file kept from the site whose bytes the account no longer holds: nothing here can send them.
      const failure = { path: sha256, error: { code: 'not_held', message: 'no local file has these bytes' } };
      run.failed.push(failure);
      input.progress.failed(failure.path, failure.error, ++count, created.missing.length);
      return;
    }
    try {
      await api.put(`${at}/files/${sha256}`, fs.createReadStream(file.absolute!), {
        contentType: 'application/octet-stream',
        bytes: file.size,
      });
      run.uploaded.push({ path: file.path, sha256, bytes: file.size });
      input.progress.uploaded(file.path, file.size, ++count, created.missing.length);
    } catch (err) {
      const failure = { path: file.path, error: fileFailure(err) };
      run.failed.push(failure);
      input.progress.failed(failure.path, failure.error, ++count, created.missing.length);
    }
  });
  run.uploaded.sort((a, b) => a.path.localeCompare(b.path));

  // A deployment with bytes missing cannot be published: it stays open (and expires after a day).
  if (run.failed.length > 0 || !input.publish)
    return { ...run, deployment: (await api.get<{ deployment: DeploymentDetail }>(at)).deployment };
  try {
    const { deployment } = await api.post<{ deployment: DeploymentDetail }>(`${at}/publish`);
    return { ...run, deployment };
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== 'deployment_failed') throw err;
    const { deployment } = await api.get<{ deployment: DeploymentDetail }>(at);
    return {
      ...run,
      deployment,
      errors: (err.details?.errors as FileProblem[] | undefined) ?? deployment.errors ?? [],
    };
  }
}
