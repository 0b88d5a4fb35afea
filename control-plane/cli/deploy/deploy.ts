// One deploy of a project folder to a site: read both sides, plan, upload and delete, and report every
// file's outcome, including each function's deployment as the API answered it.
import fs from 'node:fs';
import { type ApiClient, encodePath } from '../api-client.ts';
import { ApiError } from '../cli-error.ts';
import { formatBytes } from '../../format-bytes.ts';
import type { Site } from '../site.ts';
import { DigestCache } from './digest-cache.ts';
import { Sha256Sink } from './digest.ts';
import { DEPLOYED_FOLDERS, readLocalTree } from './local-files.ts';
import { type Upload, planDeploy } from './plan.ts';
import { type RemoteFile, listRemoteFiles } from './remote-files.ts';

export interface Deployment {
  sourcePath: string;
  status: 'READY' | 'FAILED';
  functionId?: string;
  error?: SourceProblem;
}

export interface UploadedFile {
  path: string;
  bytes: number;
  contentType: string;
  versionId: string;
  /** For api/ and cron/ sources: whether the function deployed. */
  deployment?: Deployment;
}

export interface DeployResult {
  site: { id: string; subdomain: string; url: string };
  uploaded: UploadedFile[];
  unchanged: string[];
  deleted: string[];
  failed: Array<{ path: string; error: { code: string; message: string } }>;
  /** Unchanged sources whose last deployment failed: the deploy is not done while they stay broken. */
  failing: Array<{ path: string; error: SourceProblem | null }>;
}

interface SourceProblem {
  message: string;
  line: number;
  column: number;
}

export interface DeployProgress {
  checked(done: number, total: number): void;
  /** A file was uploaded or deleted, or failed to be. */
  done(path: string, outcome: 'uploaded' | 'deleted' | 'failed', detail: string, count: number, total: number): void;
}

export interface DeployOptions {
  /** Limits the deploy to these paths and what lies under them. */
  only?: ReadonlySet<string>;
  deleteMissing: boolean;
  progress: DeployProgress;
}

const CONCURRENT_UPLOADS = 4;
// Data first and web pages last, so a function finds its data and a page its function when they appear.
const UPLOAD_ORDER = ['data', 'api', 'cron', 'web'];

export function deployFailed(result: DeployResult): boolean {
  return (
    result.failed.length > 0 ||
    result.failing.length > 0 ||
    result.uploaded.some((f) => f.deployment?.status === 'FAILED')
  );
}

export async function deploy(api: ApiClient, site: Site, dir: string, options: DeployOptions): Promise<DeployResult> {
  const objects = `buckets/${site.bucketId}/objects`;
  const local = await readLocalTree(dir);
  const remote = await listRemoteFiles(api, site.bucketId, DEPLOYED_FOLDERS);
  const cache = await DigestCache.open(site.bucketId);
  const plan = await planDeploy({
    local,
    remote,
    only: options.only,
    deleteMissing: options.deleteMissing,
    remoteDigest: (file) => remoteDigest(api, objects, file, cache),
    onChecked: options.progress.checked,
  });

  const result: DeployResult = {
    site: { id: site.id, subdomain: site.subdomain, url: site.url },
    uploaded: [],
    unchanged: plan.unchanged,
    deleted: [],
    failed: [],
    failing: [],
  };
  const total = plan.uploads.length + plan.deletes.length;
  let count = 0;
  const attempt = async (path: string, work: () => Promise<string>, outcome: 'uploaded' | 'deleted') => {
    try {
      const detail = await work();
      options.progress.done(path, outcome, detail, ++count, total);
    } catch (err) {
      const error = fileFailure(err);
      result.failed.push({ path, error });
      options.progress.done(path, 'failed', `${error.message} (${error.code})`, ++count, total);
    }
  };

  const upload = async (item: Upload) => {
    const written = await api.put<UploadedFile>(
      `${objects}/${encodePath(item.file.path)}`,
      fs.createReadStream(item.file.absolute),
      {
        contentType: item.contentType,
        bytes: item.file.bytes,
        ifMatch: item.remote?.currentVersionId,
      },
    );
    cache.set(written.versionId, item.sha256);
    const { path, bytes, contentType, versionId, deployment } = written;
    result.uploaded.push({ path, bytes, contentType, versionId, ...(deployment ? { deployment } : {}) });
    return formatBytes(bytes);
  };
  for (const folder of UPLOAD_ORDER) {
    const batch = plan.uploads.filter((u) => u.file.path.startsWith(`${folder}/`));
    await eachLimited(batch, CONCURRENT_UPLOADS, (item) => attempt(item.file.path, () => upload(item), 'uploaded'));
  }
  await eachLimited(plan.deletes, CONCURRENT_UPLOADS, (path) =>
    attempt(
      path,
      async () => {
        await api.delete(`${objects}/${encodePath(path)}`);
        result.deleted.push(path);
        return 'deleted';
      },
      'deleted',
    ),
  );

  result.failing = await failingSources(api, site.id, plan.unchanged);
  await cache.save([
    ...[...remote.values()].map((f) => f.currentVersionId),
    ...result.uploaded.map((f) => f.versionId),
  ]);
  for (const list of [result.uploaded, result.failed]) list.sort((a, b) => a.path.localeCompare(b.path));
  result.deleted.sort();
  return result;
}

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
  for await (const fn of api.list<{ path: string; status: string; lastError: SourceProblem | null }>(
    `sites/${siteId}/functions`,
    'functions',
  )) {
    if (fn.status === 'FAILED' && sources.has(fn.path)) failing.push({ path: fn.path, error: fn.lastError });
  }
  return failing;
}

/** A failure that concerns one file is reported with it; any other (no server, a refused key) ends the deploy. */
function fileFailure(err: unknown): { code: string; message: string } {
  if (err instanceof ApiError && err.status !== 401) return { code: err.code, message: err.message };
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (!(err instanceof ApiError) && typeof code === 'string' && /^E[A-Z]+$/.test(code))
    return { code: code.toLowerCase(), message: (err as Error).message };
  throw err;
}

async function eachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}
