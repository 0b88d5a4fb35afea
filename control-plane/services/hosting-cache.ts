// In-memory lookups for the hosting hot path. Every change to sites, files, functions and databases is
// published on the change feed (db/changes.ts), which calls forget* here at once for a change of this
// process and within a moment for another server's, and clear() when changes may have been missed. A
// generation counter keeps a lookup that raced with a write from storing what it read before it. Which
// account a bucket belongs to never changes: file writes check it here first.
import type { FunctionVersion } from '../../runtime-host/runtime.ts';
import type { Change, ChangeListener } from '../db/changes.ts';
import type { SiteRow } from '../db/site-row.ts';

declare module '../deps.ts' {
  interface Deps {
    hostingCache: HostingCache;
  }
}

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

/** Entries by group (a bucket's files, a site's functions), so a whole group is forgotten in one step. */
class Grouped<V> {
  #groups = new Map<string, Map<string, V>>();
  #size = 0;

  get(group: string, key: string): V | undefined {
    return this.#groups.get(group)?.get(key);
  }

  set(group: string, key: string, value: V): void {
    if (this.#size >= MAX_ENTRIES) this.clear();
    let entries = this.#groups.get(group);
    if (!entries) {
      entries = new Map();
      this.#groups.set(group, entries);
    }
    if (!entries.has(key)) this.#size++;
    entries.set(key, value);
  }

  delete(group: string, key: string): void {
    const entries = this.#groups.get(group);
    if (entries?.delete(key)) this.#size--;
  }

  hasGroup(group: string): boolean {
    return this.#groups.has(group);
  }

  deleteGroup(group: string): void {
    const entries = this.#groups.get(group);
    if (!entries) return;
    this.#size -= entries.size;
    this.#groups.delete(group);
  }

  clear(): void {
    this.#groups.clear();
    this.#size = 0;
  }
}

export class HostingCache implements ChangeListener {
  #sites = new Map<string, CachedSite | null>();
  #functions = new Grouped<FunctionVersion | null>();
  /** For ctx calls: site rows by id, and whether a site has a ready database. */
  #siteRows = new Map<string, SiteRow | null>();
  #databases = new Map<string, boolean>();
  #files = new Grouped<CachedWebFile | null>();
  /** The newest generation of each bucket a lookup has read from the metadata (bucket_generations). */
  #bucketGenerations = new Map<string, number>();
  /** Each bucket's account, once a write found it: buckets never change account and are never deleted. */
  #bucketAccounts = new Map<string, string>();
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
    return this.#files.get(bucketId, path);
  }

  rememberFile(generation: number, bucketId: string, path: string, file: CachedWebFile | null): void {
    if (generation !== this.#generation) return;
    this.#files.set(bucketId, path, file);
  }

  bucketAccount(bucketId: string): string | undefined {
    return this.#bucketAccounts.get(bucketId);
  }

  rememberBucketAccount(bucketId: string, accountId: string): void {
    if (this.#bucketAccounts.size >= MAX_ENTRIES) this.#bucketAccounts.clear();
    this.#bucketAccounts.set(bucketId, accountId);
  }

  fn(siteId: string, name: string): FunctionVersion | null | undefined {
    return this.#functions.get(siteId, name);
  }

  rememberFunction(generation: number, siteId: string, name: string, version: FunctionVersion | null): void {
    if (generation !== this.#generation) return;
    this.#functions.set(siteId, name, version);
  }

  forgetFunction(siteId: string, name: string): void {
    this.#generation++;
    this.#functions.delete(siteId, name);
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

  /**
   * A lookup read `generation` of the bucket from the metadata, in the same statement as what it looked
   * up. A newer one than seen before means a deployment committed that this node may not have heard of
   * yet: what it holds of the bucket is forgotten before the lookup answers, so no one is served an old
   * file of the bucket after a new one. Returns false when the lookup read an older generation than one
   * seen since: what it read must not be cached.
   */
  observeGeneration(bucketId: string, siteId: string, generation: number): boolean {
    const known = this.#bucketGenerations.get(bucketId);
    if (known !== undefined && generation <= known) return generation === known;
    if (this.#bucketGenerations.size >= MAX_ENTRIES) this.#bucketGenerations.clear();
    this.#bucketGenerations.set(bucketId, generation);
    // Not seen before (or forgotten since): what is held of the bucket, if anything, may be older.
    if (known !== undefined || this.#files.hasGroup(bucketId) || this.#functions.hasGroup(siteId))
      this.forgetBucket(bucketId, siteId);
    return true;
  }

  /** Forgets every file of a bucket and every function of its site: they changed together. */
  forgetBucket(bucketId: string, siteId: string): void {
    this.#generation++;
    this.#files.deleteGroup(bucketId);
    this.#functions.deleteGroup(siteId);
  }

  forgetFile(bucketId: string, path: string): void {
    this.#generation++;
    this.#files.delete(bucketId, path);
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
    this.#bucketGenerations.clear();
    this.#bucketAccounts.clear();
    this.#sites.clear();
    this.#siteRows.clear();
    this.#functions.clear();
    this.#databases.clear();
    this.#files.clear();
  }
}
