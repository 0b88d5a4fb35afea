// What a deploy has to do: upload the local files whose bytes (or type) differ from the site's, and,
// when asked, delete the site's files that are gone locally.
import { contentTypeFor } from './content-types.ts';
import { sha256File } from './digest.ts';
import type { LocalFile, LocalTree } from './local-files.ts';
import type { RemoteFile } from './remote-files.ts';

export interface Upload {
  file: LocalFile;
  sha256: string;
  contentType: string;
  /** The version it replaces, if any. */
  remote: RemoteFile | undefined;
}

export interface DeployPlan {
  uploads: Upload[];
  unchanged: string[];
  deletes: string[];
}

export interface PlanInput {
  local: LocalTree;
  remote: Map<string, RemoteFile>;
  /** Limits the deploy to these paths and what lies under them (a watcher's changes). */
  only?: ReadonlySet<string>;
  /** Delete remote files missing locally, in the deployed folders the project has. */
  deleteMissing: boolean;
  /** The SHA-256 of a remote file's current version. */
  remoteDigest(file: RemoteFile): Promise<string>;
  onChecked?(done: number, total: number): void;
}

export async function planDeploy(input: PlanInput): Promise<DeployPlan> {
  const { local, remote, only } = input;
  const wanted = (p: string) => !only || [...only].some((o) => p === o || p.startsWith(`${o}/`));
  const plan: DeployPlan = { uploads: [], unchanged: [], deletes: [] };

  const files = [...local.files.values()].filter((f) => wanted(f.path)).sort((a, b) => a.path.localeCompare(b.path));
  for (const [i, file] of files.entries()) {
    const upload: Upload = {
      file,
      sha256: await sha256File(file.absolute),
      contentType: contentTypeFor(file.path),
      remote: remote.get(file.path),
    };
    if (await same(upload, input)) plan.unchanged.push(file.path);
    else plan.uploads.push(upload);
    input.onChecked?.(i + 1, files.length);
  }

  if (input.deleteMissing) {
    for (const path of remote.keys()) {
      // A folder the project does not have is not the project's to manage (data/ written by functions).
      if (wanted(path) && !local.files.has(path) && local.folders.has(path.split('/')[0]!)) plan.deletes.push(path);
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
