// The text a deploy prints: each function's deployment (with line and column when it failed), the
// files that could not be sent, and a summary.
import type { DeployResult } from './deploy.ts';

export function deployReport(result: DeployResult): string {
  const lines: string[] = [];
  for (const file of result.uploaded) {
    const deployment = file.deployment;
    if (!deployment) continue;
    if (deployment.status === 'READY') {
      lines.push(`${file.path}: deployed`);
      continue;
    }
    const error = deployment.error;
    const at = error && error.line > 0 ? `:${error.line}:${error.column}` : '';
    lines.push(`${file.path}${at}: deployment FAILED: ${error?.message ?? 'no reason given'}`);
  }
  for (const { path, error } of result.failed) lines.push(`${path}: not deployed: ${error.message} (${error.code})`);

  const counts = [`${result.uploaded.length} uploaded`, `${result.unchanged.length} unchanged`];
  if (result.deleted.length) counts.push(`${result.deleted.length} deleted`);
  if (result.failed.length) counts.push(`${result.failed.length} failed`);
  lines.push(`${result.site.url}: ${counts.join(', ')}`);
  if (result.uploaded.some((f) => f.deployment?.status === 'FAILED')) {
    lines.push('A function whose deployment failed keeps serving its last good version, if it had one.');
  }
  return lines.join('\n');
}
