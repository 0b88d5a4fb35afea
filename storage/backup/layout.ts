// What a Berth backup archive holds, in order, and the names it may use. One ustar file:
//
//   berth-backup.json        what this is: format version, Berth version, time, how the master key is kept
//   meta.sqlite              the metadata, as one consistent snapshot
//   sites/<siteId>/db.sqlite each site database, as a snapshot of its own
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
}

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

/** Whether `name` is a member that lands in the restored data dir (as opposed to the archive's own records). */
export function isDataMember(name: string): boolean {
  if (name === META_NAME || name === STORE_BLOBS_NAME || SITE_DB_PATH.test(name) || EXPORT_PATH.test(name)) return true;
  const blob = BLOB_PATH.exec(name);
  return blob !== null && blob[2]!.startsWith(blob[1]!);
}

export const blobMember = (sha256: string) => `blobs/${sha256.slice(0, 2)}/${sha256}`;
export const siteDbMember = (siteId: string) => `sites/${siteId}/db.sqlite`;
export const exportMember = (exportId: string) => `exports/${exportId}.sql`;
