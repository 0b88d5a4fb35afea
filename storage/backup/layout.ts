// What a Berth backup archive holds, in order, and the names it may use. One ustar file:
//
//   berth-backup.json        what this is: format version, Berth version, time, how the master key is kept
//   meta.sqlite              the metadata, as one consistent snapshot
//   sites/<siteId>/db.sqlite each site database, as a snapshot of its own
//   database-replicas/<siteId>/… the files of each one's replica, when the replicas are in a folder
//   exports/<exportId>.sql   the finished database exports the metadata lists
//   blobs/<aa>/<sha256>      every blob a file version of the snapshot references, or instead:
//   blobs-in-store.txt       their digests, one a line, when they were left in the object store
//   master.key.wrapped       the master key under a passphrase (only when the operator chose that)
//   manifest.json            everything above with size and SHA-256, the schema level and counts
//   manifest.json.sha256     the manifest's own SHA-256
//
// The runtime/ folder (generated function modules, sockets, Deno's cache) is not in it: Berth
// rebuilds it from the stored versions.

export const FORMAT = 'berth-backup';
export const FORMAT_VERSION = 1;

export const HEADER_NAME = 'berth-backup.json';
export const META_NAME = 'meta.sqlite';
export const WRAPPED_KEY_NAME = 'master.key.wrapped';
export const MANIFEST_NAME = 'manifest.json';
export const MANIFEST_SUM_NAME = 'manifest.json.sha256';
export const STORE_BLOBS_NAME = 'blobs-in-store.txt';

export type MasterKeyMode = 'wrapped' | 'omitted';

export interface BackupHeader {
  format: typeof FORMAT;
  formatVersion: number;
  berthVersion: string;
  createdAt: string;
  masterKey: MasterKeyMode;
}

export interface ManifestFile {
  path: string;
  size: number;
  sha256: string;
  /** A replica file's modification time (its engine dates what it holds by it), restored with it. */
  mtime?: string;
}

/** An object store's bucket and settings, without credentials (the SDK finds those where it runs). */
export interface ObjectStoreRecord {
  bucket: string;
  /** '' or a prefix ending in '/'. */
  prefix: string;
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
}

/**
 * Where the instance's database replicas were: a folder (its files carried in the archive unless the
 * operator left them out), or an object store, where they stay.
 */
export type ReplicasRecord = { folder: string; carried: boolean } | { objectStore: ObjectStoreRecord };

export interface BackupContents {
  sites: number;
  fileVersions: number;
  blobs: number;
  siteDatabases: number;
  exports: number;
}

export interface Manifest extends BackupHeader {
  /** The metadata's schema level: the migrations applied to the snapshot, in order. */
  schema: { migrations: string[]; latest: string | null };
  /** An HMAC under the master key of a fixed text: tells the right key from a wrong one. */
  masterKeyFingerprint: string;
  contents: BackupContents;
  /** Every member before the manifest, in archive order. */
  files: ManifestFile[];
  /** Set when the blobs were left in the object store (listed in STORE_BLOBS_NAME): where they were. */
  blobsInStore?: string;
  /** Set when the instance replicated its site databases: where the replicas were. */
  replicas?: ReplicasRecord;
  /** When each archived site database's snapshot was finished, by site id. */
  databaseSnapshots?: Record<string, string>;
}

/** A problem the operator can act on: shown as one line, exit code 1. */
export class BackupError extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
export const SITE_DB_PATH = new RegExp(`^sites/(${UUID})/db\\.sqlite$`);
export const EXPORT_PATH = new RegExp(`^exports/(${UUID})\\.sql$`);
export const BLOB_PATH = /^blobs\/([0-9a-f]{2})\/([0-9a-f]{64})$/;
/** A file of a replica folder: plain names (none starting with a dot, so no `..`), a few levels deep. */
export const REPLICA_PATH = new RegExp(
  `^database-replicas/(${UUID})/((?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}/){0,6}[A-Za-z0-9_-][A-Za-z0-9._-]{0,99})$`,
);
/** Where carried replicas land in a restored data dir, unless BERTH_DATABASE_REPLICA_DIR says otherwise. */
export const REPLICAS_FOLDER = 'database-replicas';

/** Whether `name` is a member that lands in the restored data dir (as opposed to the archive's own records). */
export function isDataMember(name: string): boolean {
  if (
    name === META_NAME ||
    name === STORE_BLOBS_NAME ||
    SITE_DB_PATH.test(name) ||
    EXPORT_PATH.test(name) ||
    REPLICA_PATH.test(name)
  )
    return true;
  const blob = BLOB_PATH.exec(name);
  return blob !== null && blob[2]!.startsWith(blob[1]!);
}

export const blobMember = (sha256: string) => `blobs/${sha256.slice(0, 2)}/${sha256}`;
export const siteDbMember = (siteId: string) => `sites/${siteId}/db.sqlite`;
export const exportMember = (exportId: string) => `exports/${exportId}.sql`;
/** `relative` uses forward slashes, inside the site's replica folder. */
export const replicaMember = (siteId: string, relative: string) => `${REPLICAS_FOLDER}/${siteId}/${relative}`;
