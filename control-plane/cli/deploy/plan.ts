// What a deploy has to do: which local files' bytes (or type) differ from the site's, and, when asked,
// which of the site's files are gone locally.
import { contentTypeFor } from './content-types.ts';
import { type LocalFile, type LocalTree, partOf } from './local-files.ts';
import type { RemoteFile } from './remote-files.ts';

export interface Upload {
  file: LocalFile;
  sha256: string;
  contentType: string;
  /** The version it replaces, if any. */
  remote: RemoteFile | undefined;
}

export interface DeployPlan {
  /** Every local file with its digest and type, by path: the set a deployment declares. */
  files: Map<string, Upload>;
  /** The local files that differ from the site's. */
  uploads: Upload[];
  unchanged: string[];
  deletes: string[];
}

export interface PlanInput {
  local: LocalTree;
  remote: Map<string, RemoteFile>;
  /** Delete remote files missing locally, in the deployed folders (and of the root files) the project has. */
  deleteMissing: boolean;
  /** The SHA-256 of a local file. */
  localDigest(file: LocalFile): Promise<string>;
  /** The SHA-256 of a remote file's current version. */
  remoteDigest(file: RemoteFile): Promise<string>;
  onChecked?(done: number, total: number): void;
}

export async function planDeploy(input: PlanInput): Promise<DeployPlan> {
  const { local, remote } = input;
  const plan: DeployPlan = { files: new Map(), uploads: [], unchanged: [], deletes: [] };

  const files = [...local.files.values()].sort((a, b) => a.path.localeCompare(b.path));
  for (const [i, file] of files.entries()) {
    const upload: Upload = {
      file,
      sha256: await input.localDigest(file),
      contentType: contentTypeFor(file.path),
      remote: remote.get(file.path),
    };
    plan.files.set(file.path, upload);
    if (await same(upload, input)) plan.unchanged.push(file.path);
    else plan.uploads.push(upload);
    input.onChecked?.(i + 1, files.length);
  }

  if (input.deleteMissing) {
    for (const path of remote.keys()) {
      // A folder the project does not have is not the project's to manage (data/ written by functions),
      // nor a root file it does not have (local-files.ts).
      if (!local.files.has(path) && local.parts.has(partOf(path))) plan.deletes.push(path);
    }
  }
  return plan;
}

/** Sizes and types are compared first: a digest is fetched only for files that could be equal. */
async function same(upload: Upload, input: PlanInput): Promise<boolean> {
  const { remote, file } = upload;
  if (!remote || remote.bytes !== file.bytes || remote.contentType !== upload.contentType) return false;
  return (await input.remoteDigest(remote)) === upload.sha256;
}
