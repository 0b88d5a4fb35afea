// The site's files under the deployed folders and at the deployed root paths, as the API lists them.
import type { ApiClient } from '../api-client.ts';

export interface RemoteFile {
  id: string;
  path: string;
  bytes: number;
  contentType: string;
  currentVersionId: string;
}

export async function listRemoteFiles(
  api: ApiClient,
  bucketId: string,
  folders: readonly string[],
  rootFiles: readonly string[] = [],
): Promise<Map<string, RemoteFile>> {
  const files = new Map<string, RemoteFile>();
  const objects = `buckets/${bucketId}/objects`;
  for (const folder of folders) {
    for await (const file of api.list<RemoteFile>(objects, 'files', { prefix: `${folder}/` }))
      files.set(file.path, file);
  }
  for (const name of rootFiles) {
    for await (const file of api.list<RemoteFile>(objects, 'files', { path: name })) files.set(file.path, file);
  }
  return files;
}
