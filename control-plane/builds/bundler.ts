// One build: a site's files staged into a folder of their own, and a Deno process that bundles each
// entry into one module (deno/bundle.ts) under Deno's permissions: each entry may read only itself, the
// site's modules and the package cache, and write only its module; nothing remote is imported, and the
// registry front (package-registry.ts) is the build's proxy, the only server it reaches. No package's
// install scripts run (Deno runs none without --allow-scripts). A build has a time limit and a size
// limit per module; its folder goes whatever happens. Deno's messages name the build's folder: they
// are given back in the site's terms.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { isBuildInput } from './build-inputs.ts';
import { REGISTRY_URL } from './package-registry.ts';

const BUNDLE_PROGRAM = path.resolve(import.meta.dirname, 'deno/bundle.ts');

export interface BundleRequest {
  /** The site's files a build may read, by path: modules, entries, deno.json and deno.lock. */
  files: ReadonlyMap<string, Buffer>;
  /** The paths of the functions and cron jobs to build, each into one module. */
  entries: string[];
}

export interface BundleOptions {
  denoPath: string;
  /** Deno's cache for builds (npm packages, the bundler's own binary), shared by every build of this node. */
  cacheDir: string;
  /** Where build folders are made and removed. */
  workDir: string;
  /** The registry front, as the build's proxy (it answers for REGISTRY_URL only). */
  registryProxy: string;
  timeoutMs: number;
  maxModuleBytes: number;
}

/** A problem as Deno's bundler reports it, before it is put in words for the deployment. */
export interface BundleProblem {
  entry: string;
  text: string;
  /** Relative to the site's root for the site's own files; null when the bundler named none. */
  file: string | null;
  line: number;
  column: number;
}

export type BundleResult =
  | { ok: true; modules: Map<string, Buffer>; lock: Buffer | null }
  | { ok: false; problems: BundleProblem[]; timedOut?: boolean };

/** The deno.json a build runs with: the site's import map, nothing else of its configuration. */
function buildConfig(siteConfig: Buffer | undefined): string {
  let parsed: Record<string, unknown> = {};
  if (siteConfig) parsed = JSON.parse(siteConfig.toString('utf8')) as Record<string, unknown>;
  const { imports, scopes, compilerOptions } = parsed;
  return JSON.stringify({ imports, scopes, compilerOptions });
}

/**
 * Puts the binary Deno's bundler runs into the cache, from Berth's own dependencies, so a build needs
 * no download of it (a registry without it, or none at all, still builds). Deno asks for it by version:
 * another Deno asks for another and downloads it through the registry.
 */
function provideEsbuild(cacheDir: string): void {
  const platform = `${process.platform}-${process.arch}`;
  if (platform !== 'linux-x64') return;
  let pkgDir: string;
  try {
    pkgDir = path.dirname(createRequire(import.meta.url).resolve('deno-esbuild-linux-x64/package.json'));
  } catch {
    return;
  }
  const { version } = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string };
  const target = path.join(cacheDir, 'dl', `esbuild-${version}`, `esbuild-${platform}`);
  if (fs.existsSync(target)) return;
  fs.mkdirSync(path.dirname(target), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  fs.copyFileSync(path.join(pkgDir, 'bin', 'esbuild'), tmp);
  fs.chmodSync(tmp, 0o755);
  fs.renameSync(tmp, target);
}

export async function bundle(request: BundleRequest, options: BundleOptions): Promise<BundleResult> {
  provideEsbuild(options.cacheDir);
  const folder = path.join(options.workDir, crypto.randomUUID());
  const src = path.join(folder, 'src');
  const out = path.join(folder, 'out');
  const home = path.join(folder, 'home');
  try {
    for (const dir of [src, out, home]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const [file, bytes] of request.files) {
      if (file === 'deno.json') continue;
      const target = path.join(src, file);
      fs.mkdirSync(path.dirname(target), { recursive: true });
      fs.writeFileSync(target, bytes);
    }
    fs.writeFileSync(path.join(src, 'deno.json'), buildConfig(request.files.get('deno.json')));
    const lockPath = path.join(src, 'deno.lock');
    const npmCache = path.join(options.cacheDir, 'npm');
    fs.mkdirSync(npmCache, { recursive: true });
    const run = await execa(
      options.denoPath,
      [
        'run',
        '--no-prompt',
        '--unstable-bundle',
        `--config=${path.join(src, 'deno.json')}`,
        `--lock=${lockPath}`,
        '--node-modules-dir=none',
        // The registry front applies the minimum package age itself, and says so when it refuses.
        '--minimum-dependency-age=0',
        '--deny-import',
        '--unstable-worker-options',
        `--allow-read=${src},${npmCache}`,
        `--allow-write=${out}`,
        BUNDLE_PROGRAM,
        JSON.stringify({
          inputs: [...request.files.keys()].filter(isBuildInput).map((file) => path.join(src, file)),
          entries: request.entries,
          out,
          npmCache,
        }),
      ],
      {
        cwd: src,
        env: {
          DENO_DIR: options.cacheDir,
          DENO_NO_UPDATE_CHECK: '1',
          NO_COLOR: '1',
          HOME: home,
          NPM_CONFIG_REGISTRY: REGISTRY_URL,
          HTTP_PROXY: options.registryProxy,
          HTTPS_PROXY: options.registryProxy,
        },
        extendEnv: false,
        stdin: 'ignore',
        reject: false,
        timeout: options.timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: 1024 * 1024,
      },
    );
    if (run.timedOut)
      return {
        ok: false,
        timedOut: true,
        problems: [
          { entry: '', text: `the build took longer than ${options.timeoutMs} ms`, file: null, line: 0, column: 0 },
        ],
      };
    const reported = lastJsonLine(String(run.stdout));
    if (run.exitCode !== 0 || !reported) {
      const text = String(run.stderr).trim().split('\n').filter(Boolean).at(-1) ?? `exit code ${run.exitCode}`;
      return {
        ok: false,
        problems: [
          { entry: '', text: `the build failed: ${inSiteTerms(text, src, npmCache)}`, file: null, line: 0, column: 0 },
        ],
      };
    }
    if (reported.problems.length > 0)
      return {
        ok: false,
        problems: reported.problems.map((problem) => ({ ...problem, text: inSiteTerms(problem.text, src, npmCache) })),
      };
    const modules = new Map<string, Buffer>();
    for (const [index, entry] of request.entries.entries()) {
      const file = path.join(out, `${index}.js`);
      const bytes = fs.statSync(file).size;
      if (bytes > options.maxModuleBytes)
        return {
          ok: false,
          problems: [
            {
              entry,
              text: `the built module is ${bytes} bytes, more than the ${options.maxModuleBytes} a function may be`,
              file: entry,
              line: 0,
              column: 0,
            },
          ],
        };
      modules.set(entry, fs.readFileSync(file));
    }
    return { ok: true, modules, lock: fs.existsSync(lockPath) ? fs.readFileSync(lockPath) : null };
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** Where Deno caches the registry's packages, under the cache's npm/ folder. */
const REGISTRY_HOST = new URL(REGISTRY_URL).host;

const ONLY_MODULES =
  'a function imports only the site\'s modules (files under lib/, and files and folders named "_…" under api/ and cron/), npm: packages and node: built-ins';

/** Deno's message without its stack and the build's folders, and its permission errors in the site's words. */
function inSiteTerms(text: string, src: string, npmCache: string): string {
  const first = text.split('\n')[0]!.trim();
  const ownPath = (found: string): string | null => {
    const file = found.startsWith('file://') ? new URL(found).pathname : found;
    return file.startsWith(`${src}/`) ? file.slice(src.length + 1) : null;
  };
  const read = /^Requires read access to "(.+)", run again with the --allow-read flag$/.exec(first);
  if (read) {
    const own = ownPath(read[1]!);
    return own ? `cannot import ${own}: ${ONLY_MODULES}` : `cannot import a file outside the site: ${ONLY_MODULES}`;
  }
  if (/^Requires import access to /.test(first) || first.includes('jsr:'))
    return `cannot import a remote module: https: and jsr: imports are not allowed; ${ONLY_MODULES}`;
  return first
    .replaceAll(`${pathToFileURL(src).href}/`, '')
    .replaceAll(`${src}/`, '')
    .replaceAll(`${pathToFileURL(npmCache).href}/${REGISTRY_HOST}/`, 'npm:')
    .replaceAll(`${npmCache}/${REGISTRY_HOST}/`, 'npm:')
    .replaceAll(pathToFileURL(BUNDLE_PROGRAM).href, 'the build program')
    .replaceAll(BUNDLE_PROGRAM, 'the build program');
}

function lastJsonLine(stdout: string): { problems: BundleProblem[] } | null {
  const line = stdout.trim().split('\n').at(-1);
  if (!line?.startsWith('{')) return null;
  try {
    return JSON.parse(line) as { problems: BundleProblem[] };
  } catch {
    return null;
  }
}
