// A real npm registry for the build tests: Verdaccio (a devDependency) started in a temp dir on a free
// loopback port, with no uplink, so nothing a test resolves comes from the internet. Tests publish into
// it the fixture packages of test/fixtures/packages/, packages described in the test itself, and the
// real hono and zod tarballs `make npm-fixtures` keeps in .tools/npm-fixtures/. Publishing goes through
// the npm on PATH with `--ignore-scripts`, so no package's script ever runs here.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.ts';
import { until } from './until.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const VERDACCIO = path.join(ROOT, 'node_modules/verdaccio/bin/verdaccio');
const FIXTURES = path.join(ROOT, 'test/fixtures/packages');
const TARBALLS = path.join(ROOT, '.tools/npm-fixtures');

/** The real packages `make npm-fixtures` packs into .tools/npm-fixtures/ (the Makefile names the same). */
export const REAL_PACKAGES = { hono: '4.13.19', zod: '4.6.7' } as const;

// Verdaccio runs under this launcher, which ends it when its stdin closes: the test process holds the
// other end, so however that process ends (a failed test, a timeout, SIGKILL), no registry outlives it.
const LAUNCHER = "process.stdin.on('end', () => process.exit(0)).resume(); require(process.argv[1]);";

const run = promisify(execFile);

/** A package written out for the test: package.json is made from the fields, `files` are the rest. */
export interface PackageDescription {
  name: string;
  version: string;
  /** Paths inside the package (`index.js`, `lib/a.js`) and their text. */
  files: Record<string, string>;
  dependencies?: Record<string, string>;
  scripts?: Record<string, string>;
}

/** A package folder's path, or a package described in the test. */
export type PackageSource = string | PackageDescription;

export interface NpmRegistryOptions {
  /**
   * Packages (Verdaccio's name patterns) the registry may fetch from the machine's npm registry
   * (`npm config get registry`) when a client asks for one it does not hold. None by default.
   */
  upstream?: string[];
}

export interface NpmRegistry {
  /** The registry URL, `http://127.0.0.1:<port>/`: what npm, Deno and Berth are given. */
  url: string;
  /** Verdaccio's storage folder: a package's versions and tarballs are under `<storage>/<name>/`. */
  storage: string;
  /** Publishes a package folder or a described package with `npm publish --ignore-scripts`. */
  publish(pkg: PackageSource): Promise<void>;
  /** Publishes a tarball made by `npm pack`. */
  publishTarball(tgzPath: string): Promise<void>;
  /** Removes one version (the whole package when it is the only one) with `npm unpublish --force`. */
  unpublish(name: string, version: string): Promise<void>;
  /**
   * Serves other bytes for a version already published: unpublishes it and publishes `pkg` (whose
   * name and version must be the same) in its place, so its tarball's integrity changes.
   */
  replaceTarball(name: string, version: string, pkg: PackageSource): Promise<void>;
  /** Everything Verdaccio wrote so far (warnings and errors only). */
  output(): string;
  /** Stops Verdaccio and removes its folder. */
  stop(): Promise<void>;
}

/** The folder of a fixture package of test/fixtures/packages/. */
export function fixturePackage(name: string): string {
  return path.join(FIXTURES, name);
}

export async function startNpmRegistry(options: NpmRegistryOptions = {}): Promise<NpmRegistry> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-npm-registry-'));
  const storage = path.join(dir, 'storage');
  const upstream = options.upstream ?? [];
  const everyone = { access: '$all', publish: '$all', unpublish: '$all' };
  const packages: Record<string, object> = {};
  for (const pattern of upstream) packages[pattern] = { ...everyone, proxy: 'upstream' };
  packages['**'] = everyone;
  const config = {
    storage,
    // bcrypt's fewest rounds: every request checks the password again, 200 ms each at the default.
    auth: { htpasswd: { file: path.join(dir, 'htpasswd'), max_users: 10, rounds: 4 } },
    ...(upstream.length
      ? { uplinks: { upstream: { url: (await npm(['config', 'get', 'registry'], dir, dir)).trim() } } }
      : {}),
    packages,
    web: { enable: false },
    max_body_size: '100mb',
    log: { type: 'stdout', format: 'pretty', level: 'warn' },
  };
  // JSON is YAML: Verdaccio reads it as its own format.
  const configFile = path.join(dir, 'config.yaml');
  await fs.writeFile(configFile, JSON.stringify(config, null, 2));

  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const child: ChildProcess = spawn(
    process.execPath,
    ['-e', LAUNCHER, VERDACCIO, '--config', configFile, '--listen', `127.0.0.1:${port}`],
    // Verdaccio warns when run as root (as CI runs): harmless, and kept out of output().
    { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, NODE_NO_WARNINGS: '1' } },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    await fs.rm(dir, { recursive: true, force: true });
  };

  try {
    await until(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`verdaccio exited (${child.exitCode ?? child.signalCode}): ${output}`);
        return (await fetch(`${url}-/ping`).catch(() => null))?.ok;
      },
      'verdaccio answers /-/ping',
      { ms: 30_000 },
    );
    const token = await addUser(url);
    await fs.writeFile(path.join(dir, '.npmrc'), `//127.0.0.1:${port}/:_authToken=${token}\n`);
  } catch (err) {
    await stop();
    throw err;
  }

  // `--loglevel warn`: npm would list every file of the tarball it publishes.
  const registryArgs = [
    '--registry',
    url,
    '--userconfig',
    path.join(dir, '.npmrc'),
    '--ignore-scripts',
    '--loglevel',
    'warn',
  ];
  let made = 0;
  const publishFolder = async (folder: string) => {
    await npm(['publish', ...registryArgs], folder, dir);
  };
  const publish = async (pkg: PackageSource) => {
    if (typeof pkg === 'string') return publishFolder(pkg);
    const folder = path.join(dir, `package-${++made}`);
    await writePackage(folder, pkg);
    await publishFolder(folder);
    await fs.rm(folder, { recursive: true, force: true });
  };
  const unpublish = async (name: string, version: string) => {
    await npm(['unpublish', `${name}@${version}`, '--force', ...registryArgs], dir, dir);
  };

  return {
    url,
    storage,
    publish,
    publishTarball: async (tgzPath) => {
      await npm(['publish', path.resolve(tgzPath), ...registryArgs], dir, dir);
    },
    unpublish,
    replaceTarball: async (name, version, pkg) => {
      const manifest = typeof pkg === 'string' ? await readManifest(pkg) : pkg;
      if (manifest.name !== name || manifest.version !== version)
        throw new Error(`replaceTarball(${name}, ${version}) was given ${manifest.name}@${manifest.version}`);
      await unpublish(name, version);
      await publish(pkg);
    },
    output: () => output,
    stop,
  };
}

/** Publishes the real hono and zod (REAL_PACKAGES) into `registry`, from the tarballs make fetched. */
export async function publishRealPackages(registry: NpmRegistry): Promise<void> {
  const tarballs = Object.entries(REAL_PACKAGES).map(([name, version]) =>
    path.join(TARBALLS, `${name}-${version}.tgz`),
  );
  for (const tarball of tarballs)
    await fs.access(tarball).catch(() => {
      throw new Error(`${tarball} is missing: run \`make npm-fixtures\` (make test does)`);
    });
  await Promise.all(tarballs.map((tarball) => registry.publishTarball(tarball)));
}

/** Claims a user on a fresh registry (anyone may while max_users allows) and returns its token. */
async function addUser(url: string): Promise<string> {
  const name = 'berth-test';
  const res = await fetch(`${url}-/user/org.couchdb.user:${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, password: 'berth-test-password' }),
  });
  const body = (await res.json()) as { token?: string };
  if (!res.ok || !body.token) throw new Error(`verdaccio refused the test user: ${res.status} ${JSON.stringify(body)}`);
  return body.token;
}

async function readManifest(folder: string): Promise<{ name: string; version: string }> {
  return JSON.parse(await fs.readFile(path.join(folder, 'package.json'), 'utf8'));
}

async function writePackage(folder: string, pkg: PackageDescription): Promise<void> {
  const manifest = {
    name: pkg.name,
    version: pkg.version,
    type: 'module',
    ...(pkg.dependencies ? { dependencies: pkg.dependencies } : {}),
    ...(pkg.scripts ? { scripts: pkg.scripts } : {}),
  };
  await fs.mkdir(folder, { recursive: true });
  await fs.writeFile(path.join(folder, 'package.json'), JSON.stringify(manifest, null, 2));
  for (const [file, text] of Object.entries(pkg.files)) {
    const target = path.join(folder, file);
    await fs.mkdir(path.dirname(target), { recursive: true });
    await fs.writeFile(target, text);
  }
}

/** Runs the npm on PATH with its cache in the registry's folder `dir`, so nothing touches ~/.npm. */
async function npm(args: string[], cwd: string, dir: string): Promise<string> {
  try {
    const { stdout } = await run('npm', args, {
      cwd,
      env: { ...process.env, npm_config_cache: path.join(dir, 'npm-cache') },
    });
    return stdout;
  } catch (err) {
    const { stderr, stdout } = err as { stderr?: string; stdout?: string };
    throw new Error(`npm ${args.join(' ')} failed: ${(stderr || stdout || String(err)).trim()}`, { cause: err });
  }
}
