// The registry a build sees: a loopback front of the one configured npm registry, started for one build.
// The build knows the registry by a name that is the same for every build, node and start
// (REGISTRY_URL), which Deno writes into the locks and its package cache keys; the front is the build's
// HTTP proxy, the only server its requests reach, and it answers for that name alone (a tarball of
// another origin, a jsr: package or any other host is refused). It is also where Berth learns what
// Deno's errors do not say: that the registry did not answer, or that the versions a range matches are
// younger than the minimum package age, which this front applies by leaving them out of the package's
// document. Deno checks each tarball's integrity against the document and the lock.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Duplex, Readable } from 'node:stream';

export interface RegistryFrontOptions {
  /** The registry's base URL, e.g. https://registry.npmjs.org/ */
  upstream: string;
  /** Versions published less than this long ago are left out (0: none). */
  minAgeMs: number;
  now?: () => number;
}

/** A version left out for its age. */
export interface YoungVersion {
  version: string;
  publishedAt: string;
}

/** The registry as every build names it (NPM_CONFIG_REGISTRY), reached through the front as a proxy. */
export const REGISTRY_URL = 'http://npm.registry.berth/';

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
  close(): Promise<void>;
}

interface Packument {
  'dist-tags'?: Record<string, string>;
  versions?: Record<string, { dist?: { tarball?: string } }>;
  time?: Record<string, string>;
}

const UPSTREAM_TIMEOUT_MS = 30_000;

export async function startRegistryFront(options: RegistryFrontOptions): Promise<RegistryFront> {
  const upstream = new URL(options.upstream.endsWith('/') ? options.upstream : `${options.upstream}/`);
  const now = options.now ?? Date.now;
  const young = new Map<string, YoungVersion[]>();
  let unavailable: string | null = null;
  let waiting = 0;
  const registry = new URL(REGISTRY_URL);
  // Closing the front gives up what it still waits for from the registry.
  const closing = new AbortController();

  /** The upstream URL of a path the build asked for, under the registry's base. */
  const upstreamUrl = (path: string): URL => new URL(path.replace(/^\/+/, ''), upstream);

  const fetchUpstream = async (url: URL): Promise<Response | null> => {
    waiting++;
    try {
      return await fetch(url, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.any([AbortSignal.timeout(UPSTREAM_TIMEOUT_MS), closing.signal]),
        redirect: 'error',
      });
    } catch (err) {
      if (!closing.signal.aborted)
        unavailable ??= `the npm registry ${upstream.origin} did not answer: ${(err as Error).cause ?? (err as Error).message}`;
      return null;
    } finally {
      waiting--;
    }
  };

  /** The package's document with young versions left out and tarballs fetched through this front. */
  const frontDocument = (name: string, doc: Packument): Packument => {
    const cutoff = now() - options.minAgeMs;
    const versions = doc.versions ?? {};
    const kept: Record<string, { dist?: { tarball?: string } }> = {};
    const left: YoungVersion[] = [];
    for (const [version, manifest] of Object.entries(versions)) {
      const publishedAt = doc.time?.[version];
      if (options.minAgeMs > 0 && publishedAt && Date.parse(publishedAt) > cutoff) {
        left.push({ version, publishedAt });
        continue;
      }
      const tarball = manifest.dist?.tarball;
      const through = tarball?.startsWith(upstream.href)
        ? `${REGISTRY_URL}${tarball.slice(upstream.href.length)}`
        : tarball;
      kept[version] = { ...manifest, dist: { ...manifest.dist, tarball: through } };
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
      const path = `${target.pathname}${target.search}`;
      if (target.origin !== registry.origin || req.method !== 'GET' || path.includes('..')) {
        res.writeHead(403).end();
        return;
      }
      const answer = await fetchUpstream(upstreamUrl(path));
      if (!answer) {
        res.writeHead(502).end();
        return;
      }
      if (answer.status >= 500) unavailable ??= `the npm registry ${upstream.origin} answered ${answer.status}`;
      if (!answer.ok || path.endsWith('.tgz')) {
        res.writeHead(answer.status, {
          'content-type': answer.headers.get('content-type') ?? 'application/octet-stream',
        });
        if (answer.body) Readable.fromWeb(answer.body as never).pipe(res);
        else res.end();
        return;
      }
      const name = decodeURIComponent(path.slice(1));
      const doc = frontDocument(name, (await answer.json()) as Packument);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
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
    close: () =>
      new Promise<void>((resolve) => {
        closing.abort();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
