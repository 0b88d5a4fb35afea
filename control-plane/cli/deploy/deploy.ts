// One deploy of a project folder to a site. Its web/, api/, cron/ and lib/ files, deno.json and
// deno.lock go as one deployment: the whole set declared by digest, only the bytes the server lacks
// uploaded, published at once (or left unpublished for a preview). Its data/ files are then written
// through the file API as before, since they are the functions' own, and the site's deno.lock is saved
// into the project when it differs. Nothing is created when the site has every file already.
import { type ApiClient, encodePath } from '../api-client.ts';
import { formatBytes } from '../../format-bytes.ts';
import type { Site } from '../site.ts';
import { type DataWrites, writeDataFiles } from './data-files.ts';
import type { Deployment, DeploymentDetail, FileProblem } from './deployment.ts';
import { DigestCache } from './digest-cache.ts';
import { Sha256Sink } from './digest.ts';
import type { FileFailure } from './file-failure.ts';
import { LocalDigests } from './local-digests.ts';
import { DEPLOYED_FOLDERS, DEPLOYED_ROOT_FILES, type LocalTree, isData, partOf, readLocalTree } from './local-files.ts';
import { planDeploy } from './plan.ts';
import { type RemoteFile, listRemoteFiles } from './remote-files.ts';
import { type DeclaredFile, runDeployment } from './site-deployment.ts';
import { type SavedLock, saveSiteLock } from './site-lock.ts';

export interface DeployResult {
  site: { id: string; subdomain: string; url: string };
  /** The deployment (all but data/) as the API last answered it; null when the site had every file already. */
  deployment: DeploymentDetail | null;
  /** Whether the deployment was left unpublished on purpose (--preview). */
  preview: boolean;
  /** The files whose bytes were sent: the digests the deployment asked for, then data/ files. */
  uploaded: Array<{ path: string; bytes: number }>;
  /** The local files the site has already, with the same bytes and type. */
  unchanged: string[];
  /** The site's files removed: by the deployment's prune, and data/ files deleted. */
  deleted: string[];
  /** Files that could not be sent or deleted. */
  failed: FileFailure[];
  /** Why the deployment failed: each source's problem, as `path:line:column: message`. */
  errors: FileProblem[];
  /** Unchanged sources whose function is failing on the site (a broken file written through the file API). */
  failing: Array<{ path: string; error: Omit<FileProblem, 'path'> | null }>;
  /** data/ files written through the file API (none for a failed or a preview deployment). */
  data: DataWrites | null;
  /** The site's deno.lock, saved into the project because the project's differed or was missing. */
  savedLock: SavedLock | null;
}

export interface DeployProgress {
  checked(done: number, total: number): void;
  created(deployment: Deployment, missing: number, files: number): void;
  /** A file was uploaded or deleted, or failed to be. */
  done(path: string, outcome: 'uploaded' | 'deleted' | 'failed', detail: string, count: number, total: number): void;
}

export interface DeployOptions {
  /** Prune: the site's files gone locally are removed (in the folders the project has). */
  deleteMissing: boolean;
  /** Upload without publishing (data/ is not written either). */
  preview: boolean;
  message?: string;
  progress: DeployProgress;
  /** Digests of local files, kept between the deploys of a watcher. */
  digests?: LocalDigests;
}

export function deployFailed(result: DeployResult): boolean {
  return (
    result.failed.length > 0 ||
    result.errors.length > 0 ||
    result.failing.length > 0 ||
    result.deployment?.status === 'FAILED'
  );
}

export async function deploy(api: ApiClient, site: Site, dir: string, options: DeployOptions): Promise<DeployResult> {
  const objects = `buckets/${site.bucketId}/objects`;
  const local = await readLocalTree(dir);
  const remote = await listRemoteFiles(api, site.bucketId, DEPLOYED_FOLDERS, DEPLOYED_ROOT_FILES);
  const cache = await DigestCache.open(site.bucketId);
  const digests = options.digests ?? new LocalDigests();
  const remoteDigestOf = (file: RemoteFile) => remoteDigest(api, objects, file, cache);
  const plan = await planDeploy({
    local,
    remote,
    deleteMissing: options.deleteMissing,
    localDigest: (file) => digests.of(file),
    remoteDigest: remoteDigestOf,
    onChecked: options.progress.checked,
  });
  const result: DeployResult = {
    site: { id: site.id, subdomain: site.subdomain, url: site.url },
    deployment: null,
    preview: options.preview,
    uploaded: [],
    unchanged: plan.unchanged,
    deleted: [],
    failed: [],
    errors: [],
    failing: [],
    data: null,
    savedLock: null,
  };

  const siteChanges = [...plan.uploads.map((u) => u.file.path), ...plan.deletes].filter((p) => !isData(p));
  if (siteChanges.length > 0) {
    const files: DeclaredFile[] = [...plan.files.values()]
      .filter((u) => !isData(u.file.path))
      .map((u) => ({
        path: u.file.path,
        sha256: u.sha256,
        size: u.file.bytes,
        contentType: u.contentType,
        absolute: u.file.absolute,
      }));
    // Prune removes every file of the deployed folders and root files the set lacks; --delete removes
    // only those of the parts the project has (local-files.ts), so the site's others stay in the set.
    if (options.deleteMissing)
      for (const file of remote.values())
        if (!isData(file.path) && !local.parts.has(partOf(file.path)))
          files.push({
            path: file.path,
            sha256: await remoteDigestOf(file),
            size: file.bytes,
            contentType: file.contentType,
          });
    const run = await runDeployment(api, site, {
      files,
      prune: options.deleteMissing,
      message: options.message,
      publish: !options.preview,
      progress: {
        created: options.progress.created,
        uploaded: (path, bytes, n, total) => options.progress.done(path, 'uploaded', formatBytes(bytes), n, total),
        failed: (path, error, n, total) =>
          options.progress.done(path, 'failed', `${error.message} (${error.code})`, n, total),
      },
    });
    result.deployment = run.deployment;
    result.uploaded = run.uploaded.map(({ path, bytes }) => ({ path, bytes }));
    result.failed = run.failed;
    result.errors = run.errors;
    const { diff } = run.deployment;
    const touched = new Set([...diff.added, ...diff.changed]);
    result.unchanged = files.filter((f) => !touched.has(f.path) && local.files.has(f.path)).map((f) => f.path);
    result.unchanged.push(...plan.unchanged.filter(isData));
    result.unchanged.sort();
    if (run.deployment.status === 'PUBLISHED') result.deleted = [...diff.removed];
    for (const entry of run.deployment.fileList)
      if (entry.versionId && entry.sha256) cache.set(entry.versionId, entry.sha256);
  } else {
    result.failing = await failingSources(api, site.id, plan.unchanged);
  }

  // data/ follows a published deployment, or a deploy that needed none: a failure or a preview writes nothing.
  const live = result.deployment === null || result.deployment.status === 'PUBLISHED';
  if (live && !options.preview) {
    const data = await writeDataFiles(
      api,
      site,
      plan.uploads.filter((u) => isData(u.file.path)),
      plan.deletes.filter(isData),
      options.progress,
    );
    result.data = data;
    result.uploaded.push(...data.uploaded.map(({ path, bytes }) => ({ path, bytes })));
    result.deleted.push(...data.deleted);
    result.failed.push(...data.failed);
    for (const file of data.uploaded) cache.set(file.versionId, plan.files.get(file.path)!.sha256);
    // A project of pages alone resolves no package: the site's lock is not its to keep.
    if (holdsCode(local)) result.savedLock = await saveSiteLock(api, site.bucketId, local.root, remoteDigestOf);
  }

  await cache.save([
    ...[...remote.values()].map((f) => f.currentVersionId),
    ...(result.deployment?.fileList ?? []).flatMap((f) => (f.versionId ? [f.versionId] : [])),
    ...(result.data?.uploaded ?? []).map((f) => f.versionId),
    ...(result.savedLock ? [result.savedLock.versionId] : []),
  ]);
  result.deleted.sort();
  return result;
}

/** The project has functions' code, whose packages a deno.lock pins. */
const holdsCode = (local: LocalTree) => ['api', 'cron', 'lib', 'deno.json'].some((part) => local.parts.has(part));

/** The digest of a remote file: from the cache, else by reading its bytes once. */
async function remoteDigest(api: ApiClient, objects: string, file: RemoteFile, cache: DigestCache): Promise<string> {
  const known = cache.get(file.currentVersionId);
  if (known) return known;
  const sink = new Sha256Sink();
  await api.download(`${objects}/${encodePath(file.path)}`, sink);
  const digest = sink.digest();
  cache.set(file.currentVersionId, digest);
  return digest;
}

/** The unchanged function and cron sources whose last deployment failed. */
async function failingSources(api: ApiClient, siteId: string, unchanged: string[]): Promise<DeployResult['failing']> {
  const sources = new Set(unchanged.filter((p) => /^(api|cron)\//.test(p)));
  if (sources.size === 0) return [];
  const failing: DeployResult['failing'] = [];
  for await (const fn of api.list<{ path: string; status: string; lastError: Omit<FileProblem, 'path'> | null }>(
    `sites/${siteId}/functions`,
    'functions',
  )) {
    if (fn.status === 'FAILED' && sources.has(fn.path)) failing.push({ path: fn.path, error: fn.lastError });
  }
  return failing;
}
