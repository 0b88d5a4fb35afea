// What preview hosts (previews.ts) keep in memory: only what can no longer change. A published or failed
// deployment stays so; the state after a published deployment of a site never changes; an uploading
// deployment's declared set is fixed when it is made (its uploads and its status are read each time);
// an instant well in the past keeps its place in the history. Bounded: states and sets by their paths.
// What the owner may still change (a preview's access and secrets, a version purged from the history)
// comes as a `history` change of the site, on every node: everything held of the site is forgotten.
import { LRUCache } from 'lru-cache';
import type { SourceProblem } from '../../runtime-host/validate.ts';
import type { Change, ChangeListener } from '../db/changes.ts';

declare module '../deps.ts' {
  interface Deps {
    /** What preview hosts keep of deployments and states that no longer change. */
    previews: PreviewCache;
  }
}

/** A deployment whose status is final. */
export interface SettledDeployment {
  id: string;
  status: 'PUBLISHED' | 'FAILED';
  seq: number;
  publishedAt: string | null;
  /** Its preview host answers anyone (as the live site does), not only members. */
  public: boolean;
  /** Its preview's functions are given the site's secrets. */
  secrets: boolean;
}

/** A path's content in a preview: what a state or a declared set holds there. */
export interface PreviewEntry {
  sha256: string;
  bytes: number;
  contentType: string;
}

/** Paths held by all states and sets together. */
const MAX_PATHS = 200_000;

/** What the check of a preview's source found. */
export type SourceCheck = { problem: SourceProblem; imports?: undefined } | { problem: null; imports: boolean };

export class PreviewCache implements ChangeListener {
  readonly #deployments = new LRUCache<string, SettledDeployment>({ max: 10_000 });
  readonly #instants = new LRUCache<string, number>({ max: 10_000 });
  /** States by `<siteId> <seq>`, declared sets by `set <deploymentId>`. */
  readonly #files = new LRUCache<string, Map<string, PreviewEntry>>({
    maxSize: MAX_PATHS,
    sizeCalculation: (files) => files.size + 1,
  });
  /** A source's check, by site, path and digest: its problem, or null and whether it imports (is built). */
  readonly #sources = new LRUCache<string, SourceCheck>({ max: 5_000 });

  deployment(siteId: string, shortId: string): SettledDeployment | undefined {
    return this.#deployments.get(`${siteId} ${shortId}`);
  }

  rememberDeployment(siteId: string, shortId: string, deployment: SettledDeployment): void {
    this.#deployments.set(`${siteId} ${shortId}`, deployment);
  }

  /** The `seq` of an instant of a site's history. */
  instant(siteId: string, at: number): number | undefined {
    return this.#instants.get(`${siteId} ${at}`);
  }

  rememberInstant(siteId: string, at: number, seq: number): void {
    this.#instants.set(`${siteId} ${at}`, seq);
  }

  state(siteId: string, seq: number): Map<string, PreviewEntry> | undefined {
    return this.#files.get(`${siteId} ${seq}`);
  }

  rememberState(siteId: string, seq: number, files: Map<string, PreviewEntry>): void {
    this.#files.set(`${siteId} ${seq}`, files);
  }

  declared(deploymentId: string): Map<string, PreviewEntry> | undefined {
    return this.#files.get(`set ${deploymentId}`);
  }

  rememberDeclared(deploymentId: string, files: Map<string, PreviewEntry>): void {
    this.#files.set(`set ${deploymentId}`, files);
  }

  change(change: Change): void {
    if (change.kind !== 'history') return;
    const prefix = `${change.siteId} `;
    for (const cache of [this.#deployments, this.#instants, this.#files] as Array<LRUCache<string, object | number>>)
      for (const key of [...cache.keys()]) if (key.startsWith(prefix)) cache.delete(key);
  }

  resync(): void {
    this.#deployments.clear();
    this.#instants.clear();
    this.#files.clear();
  }

  source(key: string): SourceCheck | undefined {
    return this.#sources.get(key);
  }

  rememberSource(key: string, checked: SourceCheck): void {
    this.#sources.set(key, checked);
  }
}
