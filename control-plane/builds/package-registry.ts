// The registry a build sees: a loopback front of the one configured npm registry, started for one build.
// The build knows the registry by a name that is the same for every build, node and start
// (REGISTRY_URL), which Deno writes into the locks and its package cache keys; the front is the build's
// HTTP proxy, the only server its requests reach, and it answers for that name alone (a tarball of
// another origin, a jsr: package or any other host is refused).
//
// Every tarball a build uses is kept in the package store (package-store.ts), checked against the
// integrity the registry's document gives it: a package version is fetched from the registry once, and
// served from the store to every later build, of any site, on any node, with the registry unreachable
// (the package's document is then made from the versions the store holds). The front is also where
// Berth learns what Deno's errors do not say: that the registry did not answer, or that the versions a
// range matches are younger than the minimum package age, which the front applies by leaving them out
// of the package's document. Deno checks each tarball against the document and the lock.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

/** The registry as every build names it (NPM_CONFIG_REGISTRY), reached through the front as a proxy. */
export const REGISTRY_URL = 'http://npm.registry.berth/';

/** What the front needs of the package store. */
export interface PackageStore {
  /** The versions of a package the store holds. */
  versions(name: string): Promise<StoredPackage[]>;
  /** The tarball of a version the store holds, or null. */
  tarball(name: string, version: string): Promise<Buffer | null>;
  /** Keeps a tarball whose integrity was checked. */
  keep(pkg: StoredPackage, tarball: Buffer): Promise<void>;
}

export interface StoredPackage {
  name: string;
  version: string;
  integrity: string;
  /** The version's entry of the package's document, as the registry gave it (but its tarball's address). */
  manifest: Record<string, unknown>;
  publishedAt: string | null;
}

export interface RegistryFrontOptions {
  /** The registry's base URL, e.g. https://registry.npmjs.org/ */
  upstream: string;
  /** Versions published less than this long ago are left out (0: none). */
  minAgeMs: number;
  store: PackageStore;
  /** The most one tarball may be. */
  maxTarballBytes: number;
  now?: () => number;
}

/** A version left out for its age. */
export interface YoungVersion {
  version: string;
  publishedAt: string;
}

export interface RegistryFront {
  /** The front as the build's proxy (HTTP_PROXY, HTTPS_PROXY). */
  readonly proxy: string;
  /** What the registry could not do, for the build's errors: the first failure, or null. */
  readonly unavailable: string | null;
  /** Requests to the registry not answered yet: a build that timed out waiting on them waited on the registry. */
  readonly waiting: number;
  /** The registry's origin, for messages. */
  readonly origin: string;
  /** Versions left out for their age, by package name. */
  readonly young: ReadonlyMap<string, YoungVersion[]>;
  /** Tarballs refused for not matching the integrity their document gives, as `name@version`. */
  readonly mismatched: ReadonlySet<string>;
  /** The integrity the documents this build was given name, by `name@version`. */
  documented(key: string): string | undefined;
  close(): Promise<void>;
}

type Manifest = Record<string, unknown> & { dist?: { tarball?: string; integrity?: string; shasum?: string } };

/** Versions published before npm gave integrities have only a SHA-1 in hex. */
const sha1Integrity = (shasum: string | undefined): string | undefined =>
  shasum && /^[0-9a-f]{40}$/.test(shasum) ? `sha1-${Buffer.from(shasum, 'hex').toString('base64')}` : undefined;

interface Packument {
  name?: string;
  'dist-tags'?: Record<string, string>;
  versions?: Record<string, Manifest>;
  time?: Record<string, string>;
}

const UPSTREAM_TIMEOUT_MS = 30_000;

/** `<name>/-/<file>-<version>.tgz`, the path npm registries give a tarball, scoped names included. */
const TARBALL_PATH = /^\/((?:@[^/]+\/)?[^/@]+)\/-\/(?:[^/]+)-(\d[^/]*)\.tgz$/;

/** The digests an integrity may name (Subresource Integrity's, and npm's old SHA-1). */
const INTEGRITY_ALGORITHMS = new Set(['sha512', 'sha384', 'sha256', 'sha1']);

/** The bytes' integrity in the algorithm `integrity` names; null for an algorithm no registry should name. */
const integrityOf = (bytes: Buffer, integrity: string): string | null => {
  const algorithm = integrity.split('-')[0]!;
  if (!INTEGRITY_ALGORITHMS.has(algorithm)) return null;
  return `${algorithm}-${crypto.createHash(algorithm).update(bytes).digest('base64')}`;
};

export async function startRegistryFront(options: RegistryFrontOptions): Promise<RegistryFront> {
  const upstream = new URL(options.upstream.endsWith('/') ? options.upstream : `${options.upstream}/`);
  const now = options.now ?? Date.now;
  const young = new Map<string, YoungVersion[]>();
  const mismatched = new Set<string>();
  /** Versions whose documents this build was given: what their tarballs must be. */
  const known = new Map<string, StoredPackage>();
  let unavailable: string | null = null;
  let waiting = 0;
  const registry = new URL(REGISTRY_URL);
  // Closing the front gives up what it still waits for from the registry.
  const closing = new AbortController();

  const fetchUpstream = async (path: string, accept: string): Promise<Response | null> => {
    waiting++;
    try {
      // Appended to the registry's base, never resolved against it: a path that reads as a URL of its
      // own (a lock's tarball address is the site's to write) stays a path of the registry.
      const answer = await fetch(new URL(`${upstream.href}${path.replace(/^\/+/, '')}`), {
        headers: { accept },
        signal: AbortSignal.any([AbortSignal.timeout(UPSTREAM_TIMEOUT_MS), closing.signal]),
        redirect: 'error',
      });
      if (answer.status >= 500) unavailable ??= `the npm registry ${upstream.origin} answered ${answer.status}`;
      return answer;
    } catch (err) {
      if (!closing.signal.aborted)
        unavailable ??= `the npm registry ${upstream.origin} did not answer: ${(err as Error).cause ?? (err as Error).message}`;
      return null;
    } finally {
      waiting--;
    }
  };

  const tarballUrl = (name: string, version: string) =>
    `${REGISTRY_URL}${name}/-/${name.split('/').at(-1)}-${version}.tgz`;

  /** The package's document for the build: young versions left out, tarballs named through the front. */
  const frontDocument = (name: string, doc: Packument): Packument => {
    const cutoff = now() - options.minAgeMs;
    const kept: Record<string, Manifest> = {};
    const left: YoungVersion[] = [];
    for (const [version, manifest] of Object.entries(doc.versions ?? {})) {
      const publishedAt = doc.time?.[version] ?? null;
      if (options.minAgeMs > 0 && publishedAt && Date.parse(publishedAt) > cutoff) {
        left.push({ version, publishedAt });
        continue;
      }
      const integrity = manifest.dist?.integrity ?? sha1Integrity(manifest.dist?.shasum);
      if (!integrity) continue;
      const { dist: _dist, ...rest } = manifest;
      known.set(`${name}@${version}`, { name, version, integrity, manifest: rest, publishedAt });
      kept[version] = { ...manifest, dist: { ...manifest.dist, tarball: tarballUrl(name, version) } };
    }
    if (left.length > 0) young.set(name, left);
    const tags = Object.fromEntries(Object.entries(doc['dist-tags'] ?? {}).filter(([, version]) => version in kept));
    if (!tags.latest) {
      const newest = Object.keys(kept).sort(
        (a, b) => Date.parse(doc.time?.[b] ?? '0') - Date.parse(doc.time?.[a] ?? '0'),
      )[0];
      if (newest) tags.latest = newest;
    }
    return { ...doc, 'dist-tags': tags, versions: kept };
  };

  /** The document of a package the registry did not give: the versions the store holds, or null. */
  const storedDocument = async (name: string): Promise<Packument | null> => {
    const stored = await options.store.versions(name);
    if (stored.length === 0) return null;
    return {
      name,
      versions: Object.fromEntries(stored.map((p) => [p.version, { ...p.manifest, dist: { integrity: p.integrity } }])),
      time: Object.fromEntries(stored.filter((p) => p.publishedAt).map((p) => [p.version, p.publishedAt!])),
    };
  };

  const packument = async (name: string, path: string): Promise<{ status: number; doc?: Packument }> => {
    const answer = await fetchUpstream(path, 'application/json');
    if (answer?.ok) return { status: 200, doc: frontDocument(name, (await answer.json()) as Packument) };
    if (answer && answer.status < 500) return { status: answer.status };
    const stored = await storedDocument(name);
    return stored ? { status: 200, doc: frontDocument(name, stored) } : { status: 502 };
  };

  const tarball = async (name: string, version: string, path: string): Promise<Buffer | null> => {
    const stored = await options.store.tarball(name, version);
    if (stored) return stored;
    let pkg = known.get(`${name}@${version}`);
    // A build that has a lock may ask for a tarball before its document: read the document first.
    if (!pkg) {
      await packument(name, `/${encodeURIComponent(name).replace('%40', '@')}`);
      pkg = known.get(`${name}@${version}`);
    }
    if (!pkg) return null;
    const answer = await fetchUpstream(path, 'application/octet-stream');
    if (!answer?.ok) return null;
    const bytes = Buffer.from(await answer.arrayBuffer());
    if (bytes.length > options.maxTarballBytes || integrityOf(bytes, pkg.integrity) !== pkg.integrity) {
      mismatched.add(`${name}@${version}`);
      return null;
    }
    await options.store.keep(pkg, bytes);
    return bytes;
  };

  const server = http.createServer((req, res) => {
    void (async () => {
      // A proxy's request names its target whole: only the registry's name is answered.
      let target: URL;
      try {
        target = new URL(req.url ?? '');
      } catch {
        res.writeHead(400).end();
        return;
      }
      const path = decodeURIComponent(target.pathname);
      if (target.origin !== registry.origin || req.method !== 'GET' || path.includes('..')) {
        res.writeHead(403).end();
        return;
      }
      const file = TARBALL_PATH.exec(path);
      if (file) {
        const bytes = await tarball(file[1]!, file[2]!, target.pathname);
        if (bytes) res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(bytes);
        else res.writeHead(502).end();
        return;
      }
      const { status, doc } = await packument(path.slice(1), target.pathname);
      if (doc) res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
      else res.writeHead(status).end();
    })().catch((err: unknown) => {
      unavailable ??= `the npm registry ${upstream.origin} could not be read: ${(err as Error).message}`;
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
  });
  // A tunnel (an https: URL, jsr:'s included) is never opened.
  server.on('connect', (_req, socket: Duplex) => socket.end('HTTP/1.1 403 Forbidden\r\n\r\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    proxy: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get unavailable() {
      return unavailable;
    },
    get waiting() {
      return waiting;
    },
    origin: upstream.origin,
    young,
    mismatched,
    documented: (key) => known.get(key)?.integrity,
    close: () =>
      new Promise<void>((resolve) => {
        closing.abort();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
