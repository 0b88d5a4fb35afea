// In-memory lookups for the hosting hot path. Every change to sites, files, functions and databases is
// published on the change feed (db/changes.ts), which calls forget* here at once for a change of this
// process and within a moment for another server's, and clear() when changes may have been missed. A
// generation counter keeps a lookup that raced with a write from storing what it read before it.
import type { Deployment } from '../../runtime-host/runtime.ts';
import type { Change, ChangeListener } from '../db/changes.ts';
import type { SiteRow } from '../db/site-row.ts';

export interface CachedSite {
  id: string;
  accountId: string;
  bucketId: string;
  access: 'PUBLIC' | 'PRIVATE';
  status: 'ACTIVE' | 'ARCHIVED';
}

export interface CachedWebFile {
  versionId: string;
  sha256: string;
  bytes: number;
  contentType: string;
  /** Response header values, computed once per version rather than per request. */
  etag: string;
  lastModified: string;
}

const MAX_ENTRIES = 20_000;

export class HostingCache implements ChangeListener {
  #sites = new Map<string, CachedSite | null>();
  #functions = new Map<string, Deployment | null>();
  /** For ctx calls: site rows by id, and whether a site has a ready database. */
  #siteRows = new Map<string, SiteRow | null>();
  #databases = new Map<string, boolean>();
  #files = new Map<string, CachedWebFile | null>();
  #generation = 0;

  /** Marks the start of a lookup; pass the result to the matching remember* call. */
  generation(): number {
    return this.#generation;
  }

  site(subdomain: string): CachedSite | null | undefined {
    return this.#sites.get(subdomain);
  }

  rememberSite(generation: number, subdomain: string, site: CachedSite | null): void {
    if (generation !== this.#generation) return;
    if (this.#sites.size >= MAX_ENTRIES) this.#sites.clear();
    this.#sites.set(subdomain, site);
  }

  file(bucketId: string, path: string): CachedWebFile | null | undefined {
    return this.#files.get(fileKey(bucketId, path));
  }

  rememberFile(generation: number, bucketId: string, path: string, file: CachedWebFile | null): void {
    if (generation !== this.#generation) return;
    if (this.#files.size >= MAX_ENTRIES) this.#files.clear();
    this.#files.set(fileKey(bucketId, path), file);
  }

  fn(siteId: string, name: string): Deployment | null | undefined {
    return this.#functions.get(fileKey(siteId, name));
  }

  rememberFunction(generation: number, siteId: string, name: string, deployment: Deployment | null): void {
    if (generation !== this.#generation) return;
    if (this.#functions.size >= MAX_ENTRIES) this.#functions.clear();
    this.#functions.set(fileKey(siteId, name), deployment);
  }

  forgetFunction(siteId: string, name: string): void {
    this.#generation++;
    this.#functions.delete(fileKey(siteId, name));
  }

  siteRow(id: string): SiteRow | null | undefined {
    return this.#siteRows.get(id);
  }

  rememberSiteRow(generation: number, id: string, row: SiteRow | null): void {
    if (generation !== this.#generation) return;
    if (this.#siteRows.size >= MAX_ENTRIES) this.#siteRows.clear();
    this.#siteRows.set(id, row);
  }

  hasDatabase(siteId: string): boolean | undefined {
    return this.#databases.get(siteId);
  }

  rememberDatabase(generation: number, siteId: string, ready: boolean): void {
    if (generation !== this.#generation) return;
    if (this.#databases.size >= MAX_ENTRIES) this.#databases.clear();
    this.#databases.set(siteId, ready);
  }

  forgetDatabase(siteId: string): void {
    this.#generation++;
    this.#databases.delete(siteId);
  }

  forgetSites(): void {
    this.#generation++;
    this.#sites.clear();
    this.#siteRows.clear();
  }

  /** Forgets every file of a bucket and every function of its site: they changed together. */
  forgetBucket(bucketId: string, siteId: string): void {
    this.#generation++;
    const prefix = `${bucketId}\u0000`;
    for (const key of this.#files.keys()) if (key.startsWith(prefix)) this.#files.delete(key);
    const functions = `${siteId}\u0000`;
    for (const key of this.#functions.keys()) if (key.startsWith(functions)) this.#functions.delete(key);
  }

  forgetFile(bucketId: string, path: string): void {
    this.#generation++;
    this.#files.delete(fileKey(bucketId, path));
  }

  /** The change feed's listener: forgets what a change touched. */
  change(change: Change): void {
    if (change.kind === 'file') this.forgetFile(change.bucketId, change.path);
    else if (change.kind === 'sites') this.forgetSites();
    else if (change.kind === 'database') this.forgetDatabase(change.siteId);
    else if (change.kind === 'function') this.forgetFunction(change.siteId, change.name);
    else if (change.kind === 'bucket') this.forgetBucket(change.bucketId, change.siteId);
  }

  /** Changes may have been missed: forgets everything. */
  resync(): void {
    this.clear();
  }

  /** Forgets every lookup (blobs are immutable and stay). */
  clear(): void {
    this.#generation++;
    this.#sites.clear();
    this.#siteRows.clear();
    this.#functions.clear();
    this.#databases.clear();
    this.#files.clear();
  }
}

const fileKey = (bucketId: string, path: string): string => `${bucketId}\u0000${path}`;
