// Preview hosts (docs/deployments.md): `<short id>--<subdomain>` serves one deployment of a site and
// `t<unix ms>--<subdomain>` the site as it was at an instant: its files and functions. A site's past is
// its owner's: a preview host answers only the account's signed-in members, unless the owner made that
// deployment's preview PUBLIC (it then answers as the live site does); an instant is never public. A
// preview's functions get the site's secrets only when the owner gave its deployment them; an
// instant's never. A published deployment shows the site right after it; an uploading one its declared
// set over the site's current files (with prune, the paths a deployment owns, pruned-paths.ts, only
// from the set); a failed one, an unknown label or an instant before the history begins show nothing.
// A preview's functions run on a branch of the site's database (database-branches/), never on the
// database itself, and as functions of their own (`preview-<siteId>-<name>`, or
// `preview-secrets-<siteId>-<name>` when given the secrets, one version per source digest), so they
// never touch the live function's workers or module files, and the pool's limits hold them as any worker.
import { removeFunctionFilesWhere, writeVersionFiles, writtenModule } from '../../runtime-host/function-files.ts';
import type { FunctionVersion } from '../../runtime-host/runtime.ts';
import { functionName, validateFunction } from '../../runtime-host/validate.ts';
import { BerthError } from '../errors.ts';
import type { Deps } from '../deps.ts';
import type { CachedSite, CachedWebFile } from '../services/hosting-cache.ts';
import { resolveWebFile } from '../services/hosting.ts';
import type { PreviewEntry } from './preview-cache.ts';
import { buildEntries } from '../builds/builds.ts';
import {
  currentFileDigests,
  forgetPreviewFunction,
  isPreviewFunction,
  previewFunctionId,
} from '../services/functions.ts';
import { isPrunedPath } from './pruned-paths.ts';
import { OPEN_FOR_MS, historyStart, seqAt, stateAtSeq } from '../history/site-history.ts';
import { instantBranch, useBranch } from '../database-branches/branches.ts';
import { hasDatabase } from '../services/databases.ts';

/** An instant is remembered once this far in the past: no publish still in flight can land before it. */
const SETTLED_MS = 10 * 60_000;

export interface Preview {
  site: CachedSite;
  /** The deployment served; null for an instant. */
  deploymentId: string | null;
  /** An uploading deployment: its set over the site's current files. Otherwise the history's state at `seq`. */
  open: { prune: boolean } | null;
  seq: number;
  /** Last-Modified of the files it serves itself: when the deployment was made or published, or the instant. */
  lastModified: string;
  /** Anyone may open it, as they may the live site; otherwise only the account's signed-in members. */
  public: boolean;
  /** Its functions are given the site's secrets. */
  secrets: boolean;
  /** The branch of the site's database its functions use (database-branches/branches.ts). */
  branch: string;
  /** An uploading deployment that carries migrations: its branch is made before its functions answer. */
  migrates: boolean;
}

interface DeploymentRow {
  id: string;
  status: 'UPLOADING' | 'PUBLISHED' | 'FAILED';
  prune: boolean | number;
  seq: number | string | null;
  created_at: string;
  published_at: string | null;
  preview_access: string;
  preview_secrets: boolean | number;
  migrations: string | null;
}

/** An instant's label, `t<unix ms>`; any other label is a deployment's short id. */
export const isInstantLabel = (label: string): boolean => label.startsWith('t') && label.length === 14;

/** What a preview label (services/subdomains.ts's `previewOf`) shows of an ACTIVE site, or null when nothing. */
export async function resolvePreview(deps: Deps, site: CachedSite, label: string): Promise<Preview | null> {
  return isInstantLabel(label)
    ? instantPreview(deps, site, Number(label.slice(1)))
    : deploymentPreview(deps, site, label);
}

async function deploymentPreview(deps: Deps, site: CachedSite, shortId: string): Promise<Preview | null> {
  let settled = deps.previews.deployment(site.id, shortId);
  if (!settled) {
    const row = (await deps
      .db('deployments')
      .where({ site_id: site.id, short_id: shortId })
      .first(
        'id',
        'status',
        'prune',
        'seq',
        'created_at',
        'published_at',
        'preview_access',
        'preview_secrets',
        'migrations',
      )) as DeploymentRow | undefined;
    if (!row) return null;
    const access = { public: row.preview_access === 'PUBLIC', secrets: Boolean(row.preview_secrets) };
    if (row.status === 'UPLOADING') {
      // Past its day it is as good as failed, whether or not it has been expired yet.
      if (Date.parse(row.created_at) < deps.now().getTime() - OPEN_FOR_MS) return null;
      return {
        site,
        deploymentId: row.id,
        open: { prune: Boolean(row.prune) },
        seq: 0,
        lastModified: row.created_at,
        ...access,
        branch: row.id,
        migrates: row.migrations !== null,
      };
    }
    settled = { id: row.id, status: row.status, seq: Number(row.seq ?? 0), publishedAt: row.published_at, ...access };
    deps.previews.rememberDeployment(site.id, shortId, settled);
  }
  if (settled.status !== 'PUBLISHED') return null;
  return {
    site,
    deploymentId: settled.id,
    open: null,
    seq: settled.seq,
    lastModified: settled.publishedAt!,
    public: settled.public,
    secrets: settled.secrets,
    // Published, it shows the site right after its publish: the database then, too.
    branch: instantBranch(Date.parse(settled.publishedAt!)),
    migrates: false,
  };
}

async function instantPreview(deps: Deps, site: CachedSite, at: number): Promise<Preview | null> {
  const lastModified = new Date(at).toISOString();
  const known = deps.previews.instant(site.id, at);
  const instant = {
    site,
    deploymentId: null,
    open: null,
    lastModified,
    public: false,
    secrets: false,
    branch: instantBranch(at),
    migrates: false,
  };
  if (known !== undefined) return { ...instant, seq: known };
  if (lastModified < (await historyStart(deps, site.id))) return null;
  const seq = await seqAt(deps, site.id, lastModified);
  if (at < deps.now().getTime() - SETTLED_MS) deps.previews.rememberInstant(site.id, at, seq);
  return { ...instant, seq };
}

async function stateOf(deps: Deps, preview: Preview): Promise<Map<string, PreviewEntry>> {
  const known = deps.previews.state(preview.site.id, preview.seq);
  if (known) return known;
  const state: Map<string, PreviewEntry> = await stateAtSeq(deps, preview.site.id, preview.seq);
  deps.previews.rememberState(preview.site.id, preview.seq, state);
  return state;
}

async function declaredSet(deps: Deps, deploymentId: string): Promise<Map<string, PreviewEntry>> {
  const known = deps.previews.declared(deploymentId);
  if (known) return known;
  const rows = (await deps
    .db('deployment_files')
    .where({ deployment_id: deploymentId })
    .select('path', 'sha256', 'bytes', 'content_type')) as Array<{
    path: string;
    sha256: string | null;
    bytes: number | string;
    content_type: string | null;
  }>;
  const set = new Map<string, PreviewEntry>();
  // A removal row is a publish that committed meanwhile; the next request reads it as published.
  for (const row of rows)
    if (row.sha256 !== null)
      set.set(row.path, { sha256: row.sha256, bytes: Number(row.bytes), contentType: row.content_type! });
  deps.previews.rememberDeclared(deploymentId, set);
  return set;
}

/**
 * Whether the preview may serve these bytes: the account holds them, or they were uploaded for this
 * deployment. A set declares digests it may not have sent yet; bytes that are another account's are
 * never served for it.
 */
async function held(deps: Deps, preview: Preview, sha256: string): Promise<boolean> {
  if (await deps.db('account_blobs').where({ account_id: preview.site.accountId, blob_sha256: sha256 }).first('bytes'))
    return true;
  if (!preview.open || !preview.deploymentId) return false;
  return Boolean(
    await deps.db('deployment_uploads').where({ deployment_id: preview.deploymentId, sha256 }).first('bytes'),
  );
}

/**
 * The file a preview serves at a full bucket path (e.g. "web/index.html"), or null: not in its state,
 * or its bytes not uploaded yet.
 */
export async function previewFile(deps: Deps, preview: Preview, path: string): Promise<CachedWebFile | null> {
  let entry: PreviewEntry | undefined;
  if (preview.open && preview.deploymentId) {
    entry = (await declaredSet(deps, preview.deploymentId)).get(path);
    if (!entry) {
      if (preview.open.prune && isPrunedPath(path)) return null;
      // Not in the set: the site's current file, exactly as the live site serves it.
      return resolveWebFile(deps, preview.site, path);
    }
  } else {
    entry = (await stateOf(deps, preview)).get(path);
  }
  if (!entry || !(await held(deps, preview, entry.sha256))) return null;
  return {
    versionId: '',
    sha256: entry.sha256,
    bytes: entry.bytes,
    contentType: entry.contentType,
    etag: `"${entry.sha256}"`,
    lastModified: new Date(preview.lastModified).toUTCString(),
  };
}

/**
 * Makes the branch of a preview whose deployment carries migrations before its functions answer, so
 * that migrations failing on it are the preview's answer (`branch_failed`, naming the migration), not a
 * function's error; other previews make theirs on their functions' first database call.
 */
export async function prepareBranch(deps: Deps, preview: Preview): Promise<void> {
  if (preview.migrates && (await hasDatabase(deps, preview.site.id)))
    await useBranch(deps, preview.site.id, preview.branch);
}

/** Module files of previews' functions: the runtime dir is disposable, and a start begins without them. */
export const removePreviewModules = (runtimeDir: string): void =>
  removeFunctionFilesWhere(runtimeDir, isPreviewFunction);

/**
 * The function a preview serves at `/api/<name>`, or null. Its source is checked as publishing checks
 * it; one that fails answers 422 with the problem.
 */
export async function previewEndpoint(deps: Deps, preview: Preview, name: string): Promise<FunctionVersion | null> {
  const path = `api/${name}.ts`;
  if (!functionName(path).ok) return null;
  const file = await previewFile(deps, preview, path);
  if (!file) return null;
  const functionId = previewFunctionId(preview.site.id, name, preview.secrets);
  const key = `${preview.site.id} ${path} ${file.sha256}`;
  let checked = deps.previews.source(key);
  let source: string | undefined;
  if (!checked) {
    source = (await deps.blobs.read(file.sha256)).toString('utf8');
    const validation = validateFunction(path, source);
    checked = validation.ok ? { problem: null, imports: Boolean(validation.imports) } : { problem: validation.problem };
    deps.previews.rememberSource(key, checked);
  }
  if (checked.problem) throw compileFailed(path, checked.problem);
  if (checked.imports) {
    // Built from the preview's own modules: a build made before (publish, or an earlier request) is found by its inputs.
    const outcome = await buildEntries(deps, preview.site.accountId, await previewDigests(deps, preview), [path]);
    if (!outcome.ok) {
      const first = outcome.problems[0]!;
      throw compileFailed(first.path || path, first);
    }
    const module = outcome.modules.get(path)!;
    const versionId = `${file.sha256}.${module.sha256.slice(0, 16)}`;
    const modulePath =
      writtenModule(deps.runtimeDir, functionId, versionId, 'js') ??
      writeVersionFiles(deps.runtimeDir, functionId, versionId, await deps.blobs.read(module.sha256), 'js').modulePath;
    return { functionId, versionId, siteId: preview.site.id, path, kind: 'api', modulePath, branch: preview.branch };
  }
  let modulePath = writtenModule(deps.runtimeDir, functionId, file.sha256);
  if (!modulePath) {
    source ??= (await deps.blobs.read(file.sha256)).toString('utf8');
    modulePath = writeVersionFiles(deps.runtimeDir, functionId, file.sha256, source).modulePath;
  }
  return {
    functionId,
    versionId: file.sha256,
    siteId: preview.site.id,
    path,
    kind: 'api',
    modulePath,
    branch: preview.branch,
  };
}

const compileFailed = (path: string, problem: { line: number; column: number; message: string }) =>
  new BerthError('function_compile_failed', `${path}:${problem.line}:${problem.column}: ${problem.message}`, {
    error: problem,
  });

/** The files a preview shows, path → sha256: what its functions are built from. */
async function previewDigests(deps: Deps, preview: Preview): Promise<Map<string, string>> {
  if (!preview.open || !preview.deploymentId) {
    return new Map([...(await stateOf(deps, preview))].map(([path, entry]) => [path, entry.sha256]));
  }
  const digests = await currentFileDigests(deps, preview.site.bucketId);
  if (preview.open.prune) for (const path of digests.keys()) if (isPrunedPath(path)) digests.delete(path);
  for (const [path, entry] of await declaredSet(deps, preview.deploymentId)) digests.set(path, entry.sha256);
  return digests;
}

/**
 * Retires, on every node, the preview workers of the deployments' functions, given secrets or not, and
 * removes their module files (a preview that needs one again writes it again): for deployments that
 * failed or expired, and for one whose secrets were given or taken back.
 */
export async function forgetPreviewFunctions(deps: Deps, siteId: string, deploymentIds: string[]): Promise<void> {
  const paths = (await deps
    .db('deployment_files')
    .whereIn('deployment_id', deploymentIds)
    .andWhereRaw("substr(path, 1, 4) = 'api/'")
    .distinct('path')
    .pluck('path')) as string[];
  for (const path of paths) await forgetPreviewFunction(deps, siteId, path);
}
