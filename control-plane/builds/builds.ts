// Builds of functions that import: each entry (an api/ or cron/ source) with the site's modules, its
// deno.json and deno.lock, bundled into one module (bundler.ts) through the registry front
// (package-registry.ts). A build is known by the digest of what it was made from, and its module is a
// blob referenced by its row: the same files built again, on any node, after a rollback or a restore,
// find it there and need no registry. Deno's errors are put in the deployment's words: each with its
// path, line and column, and the registry's own failures named as such.
import crypto from 'node:crypto';
import { type Deps, timestamp } from '../deps.ts';
import type { Config } from '../config.ts';
import { isBuildInput } from './build-inputs.ts';
import type { BuildSlots } from './build-slots.ts';
import { type BundleProblem, bundle } from './bundler.ts';
import { keepReferenced } from './kept-blobs.ts';
import { lockedPackages } from './lock-packages.ts';
import { type RegistryFront, startRegistryFront } from './package-registry.ts';
import { packageStore } from './package-store.ts';

declare module '../deps.ts' {
  interface Deps {
    /** Where and with what this node builds functions. */
    builder: Builder;
  }
}

export interface Builder {
  denoPath: string;
  cacheDir: string;
  workDir: string;
  slots: BuildSlots;
}

/** A module a build made, stored as a blob. */
export interface BuiltModule {
  sha256: string;
  bytes: number;
}

/** A build's problem, as a failed deployment lists it. */
export interface BuildProblem {
  path: string;
  line: number;
  column: number;
  message: string;
}

export type BuildOutcome =
  | { ok: true; modules: Map<string, BuiltModule>; lock: Buffer | null }
  | { ok: false; problems: BuildProblem[]; registryUnavailable: boolean };

/** The most a built module may be. */
export const MAX_MODULE_BYTES = 10 * 1024 * 1024;

/** Changes whenever the same files could build into something else: the bundler and how it is run. */
const BUILDER = 'deno-2.9.5/1';

/** The most one npm package's tarball may be. */
const MAX_TARBALL_BYTES = 64 * 1024 * 1024;

const buildKey = (entry: string, inputs: Array<[string, string]>): string =>
  crypto
    .createHash('sha256')
    .update(JSON.stringify([BUILDER, entry, inputs]))
    .digest('hex');

/**
 * Builds `entries` from the site's files as `files` (path → sha256) has them, for the site's account
 * (whose builds take their turn for a slot): the modules stored for builds made before, new ones for
 * the rest.
 */
export async function buildEntries(
  deps: Pick<Deps, 'builder' | 'blobs' | 'db' | 'hotSql' | 'config' | 'now'>,
  accountId: string,
  files: ReadonlyMap<string, string>,
  entries: string[],
): Promise<BuildOutcome> {
  const inputs = [...files].filter(([path]) => isBuildInput(path)).sort(([a], [b]) => (a < b ? -1 : 1));
  const keys = new Map(entries.map((entry) => [entry, buildKey(entry, [...inputs, [entry, files.get(entry)!]])]));
  // Builds made before are marked used as they are taken, so that none is forgotten meanwhile (unused-builds.ts).
  const modules = await deps.hotSql.write(async (sql) => {
    const found = new Map<string, BuiltModule>();
    for (const [entry, key] of keys) {
      const row = await sql.get<{ module_sha256: string; module_bytes: number | string }>(
        'UPDATE builds SET used_at = ? WHERE key = ? RETURNING module_sha256, module_bytes',
        timestamp(deps),
        key,
      );
      if (row) found.set(entry, { sha256: row.module_sha256, bytes: Number(row.module_bytes) });
    }
    return found;
  });
  const missing = entries.filter((entry) => !modules.has(entry));
  if (missing.length === 0) return { ok: true, modules, lock: null };

  const config = files.get('deno.json');
  const read = new Map<string, Buffer>();
  for (const [path, sha256] of [...inputs, ...missing.map((entry) => [entry, files.get(entry)!] as const)])
    read.set(path, await deps.blobs.read(sha256));
  if (config) {
    const problem = configProblem(read.get('deno.json')!);
    if (problem) return { ok: false, problems: [problem], registryUnavailable: false };
  }

  const front = await startRegistryFront({
    upstream: deps.config.npmRegistry,
    minAgeMs: deps.config.npmMinAgeMinutes * 60_000,
    store: packageStore(deps),
    maxTarballBytes: MAX_TARBALL_BYTES,
  });
  let result: Awaited<ReturnType<typeof bundle>>;
  let waitingOnRegistry = false;
  try {
    result = await deps.builder.slots.run(accountId, () =>
      bundle(
        { files: read, entries: missing },
        {
          ...deps.builder,
          registryProxy: front.proxy,
          timeoutMs: deps.config.buildTimeoutMs,
          maxModuleBytes: MAX_MODULE_BYTES,
        },
      ),
    );
  } finally {
    waitingOnRegistry = front.waiting > 0;
    await front.close();
  }
  if (!result.ok) {
    const unavailable =
      front.unavailable ??
      (result.timedOut && waitingOnRegistry
        ? `the npm registry ${front.origin} did not answer within the build's ${deps.config.buildTimeoutMs} ms (BERTH_BUILD_TIMEOUT_MS)`
        : null);
    if (unavailable)
      return {
        ok: false,
        registryUnavailable: true,
        problems: [{ path: '', line: 0, column: 0, message: `${unavailable}: nothing was built or changed` }],
      };
    const integrity = integrityProblems(read.get('deno.lock'), front);
    if (integrity.length > 0) return { ok: false, registryUnavailable: false, problems: integrity };
    return {
      ok: false,
      registryUnavailable: false,
      problems: result.problems.map((p) => inWords(p, front, deps.config)),
    };
  }
  for (const [entry, bytes] of result.modules)
    modules.set(entry, await keepModule(deps, keys.get(entry)!, entry, bytes));
  return { ok: true, modules, lock: result.lock };
}

/** deno.json that is not a JSON object, with where it breaks. */
function configProblem(bytes: Buffer): BuildProblem | null {
  const text = bytes.toString('utf8');
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return null;
    return {
      path: 'deno.json',
      line: 1,
      column: 1,
      message: 'deno.json must be a JSON object, such as {"imports": {}}',
    };
  } catch (err) {
    return { path: 'deno.json', line: 1, column: 1, message: `deno.json is not valid JSON: ${(err as Error).message}` };
  }
}

/**
 * Packages whose bytes are not what they should be, which Deno's bundler reports only as modules not
 * found: a version whose integrity in the registry's document is not the one deno.lock pins (its
 * tarball changed after the lock was written), or a tarball that does not match its own document.
 */
function integrityProblems(lock: Buffer | undefined, front: RegistryFront): BuildProblem[] {
  const problems: BuildProblem[] = [];
  for (const { name, version, integrity } of lockedPackages(lock ?? null)) {
    const key = `${name}@${version}`;
    const documented = front.documented(key);
    if (integrity && documented && documented !== integrity)
      problems.push({
        path: 'deno.lock',
        line: 0,
        column: 0,
        message: `npm:${key}: the registry's package is not the one deno.lock pins (integrity ${integrity}, the registry's ${documented}): it changed after the lock was written`,
      });
  }
  for (const key of front.mismatched)
    problems.push({
      path: '',
      line: 0,
      column: 0,
      message: `npm:${key}: the registry's tarball does not match the integrity its own document gives`,
    });
  return problems;
}

const CONSTRAINT = /^Could not find constraint '(.+)@([^@']*)' in the list of packages\.?$/;

/** A bundler's problem as the deployment says it: at the site's own file, npm's failures in npm's terms. */
function inWords(problem: BundleProblem, front: RegistryFront, config: Pick<Config, 'npmMinAgeMinutes'>): BuildProblem {
  const own = problem.file && !problem.file.startsWith('/') && !problem.file.includes(':') ? problem.file : null;
  const at = own
    ? { path: own, line: problem.line, column: problem.column }
    : { path: problem.entry, line: 0, column: 0 };
  const constraint = CONSTRAINT.exec(problem.text);
  if (!constraint) return { ...at, message: problem.text };
  const [, name, range] = constraint as unknown as [string, string, string];
  const young = front.young.get(name);
  if (young && young.length > 0) {
    const versions = young.map((v) => `${v.version} (published ${v.publishedAt})`).join(', ');
    return {
      ...at,
      message: `npm:${name}@${range}: no version old enough: packages are used once published for ${config.npmMinAgeMinutes} minutes (BERTH_NPM_MIN_AGE_MINUTES), and ${versions} ${young.length === 1 ? 'is' : 'are'} younger`,
    };
  }
  return { ...at, message: `npm:${name}@${range}: no version matches` };
}

/** Stores a built module and the row that references it; the module of the build row there is, if one was made meanwhile. */
function keepModule(
  deps: Pick<Deps, 'blobs' | 'hotSql' | 'now'>,
  key: string,
  entry: string,
  bytes: Buffer,
): Promise<BuiltModule> {
  return keepReferenced(deps, bytes, async (sql, blob) => {
    await sql.run(
      'INSERT INTO builds (key, entry, module_sha256, module_bytes, created_at, used_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET used_at = excluded.used_at',
      key,
      entry,
      blob.sha256,
      blob.bytes,
      timestamp(deps),
      timestamp(deps),
    );
    const row = (await sql.get<{ module_sha256: string; module_bytes: number | string }>(
      'SELECT module_sha256, module_bytes FROM builds WHERE key = ?',
      key,
    ))!;
    return { sha256: row.module_sha256, bytes: Number(row.module_bytes) };
  });
}
