// The text a deploy prints: each file's problem (`path:line:column: message`), the deployment's short
// id with what it changed, its preview URL, what was written to data/, and the site's deno.lock saved
// into the project.
import { formatBytes } from '../../format-bytes.ts';
import type { DeployResult } from './deploy.ts';
import { diffCounts, problemLine } from './deployment.ts';
import { isData } from './local-files.ts';

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

export function deployReport(result: DeployResult): string {
  const lines: string[] = [];
  for (const { path, error } of result.failed) lines.push(`${path}: not sent: ${error.message} (${error.code})`);
  for (const problem of result.errors) lines.push(problemLine(problem));
  for (const { path, error } of result.failing)
    lines.push(
      `${problemLine({ path, message: error?.message ?? 'no reason given', line: error?.line ?? 0, column: error?.column ?? 0 })} (unchanged here; its function FAILED on the site)`,
    );

  const sent = result.uploaded.filter((f) => !isData(f.path));
  const uploaded = `${sent.length} uploaded (${formatBytes(sent.reduce((sum, f) => sum + f.bytes, 0))})`;
  const unchanged = `${result.unchanged.filter((p) => !isData(p)).length} unchanged`;
  const deployment = result.deployment;
  if (!deployment) {
    lines.push(`${result.site.url}: nothing to deploy, the site has these files already (${unchanged})`);
  } else if (deployment.status === 'FAILED') {
    lines.push(`deployment ${deployment.shortId} FAILED: nothing about the site changed`);
  } else if (deployment.status === 'UPLOADING' && !result.preview) {
    lines.push(
      `deployment ${deployment.shortId} not published: ${plural(result.failed.length, 'file')} could not be sent, nothing about the site changed`,
    );
  } else {
    const what = `${diffCounts(deployment.diff)}, ${unchanged}; ${uploaded}`;
    if (deployment.status === 'UPLOADING') {
      lines.push(`deployment ${deployment.shortId} uploaded, not published: ${what}`);
      lines.push(`preview: ${deployment.previewUrl}`);
      lines.push(`publish: berth deployments publish ${deployment.shortId} --site ${result.site.subdomain}`);
    } else {
      lines.push(`deployment ${deployment.shortId} published: ${what}`);
      lines.push(`preview: ${deployment.previewUrl}`);
      lines.push(`live:    ${result.site.url}`);
    }
  }

  const data = result.data;
  const dataUnchanged = result.unchanged.filter(isData).length;
  if (data && data.uploaded.length + data.deleted.length + data.failed.length + dataUnchanged > 0) {
    const counts = [`${data.uploaded.length} uploaded`, `${dataUnchanged} unchanged`];
    if (data.deleted.length) counts.push(`${data.deleted.length} deleted`);
    if (data.failed.length) counts.push(`${data.failed.length} failed`);
    lines.push(`data/ (through the file API): ${counts.join(', ')}`);
  }
  if (result.savedLock)
    lines.push(`saved the site's deno.lock into ${result.savedLock.path}: the next deploy resolves the same packages`);
  return lines.join('\n');
}
