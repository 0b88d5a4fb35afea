// The text a deploy prints: each function's deployment (with line and column when it failed), the
// files that could not be sent, and a summary.
import type { DeployResult } from './deploy.ts';

export function deployReport(result: DeployResult): string {
  const lines: string[] = [];
  for (const file of result.uploaded) {
    if (file.deployment?.status === 'READY') lines.push(`${file.path}: deployed`);
    else if (file.deployment) lines.push(problem(file.path, 'deployment FAILED', file.deployment.error));
  }
  for (const { path, error } of result.failing)
    lines.push(problem(path, 'deployment FAILED (source unchanged)', error ?? undefined));
  for (const { path, error } of result.failed) lines.push(`${path}: not deployed: ${error.message} (${error.code})`);

  const counts = [`${result.uploaded.length} uploaded`, `${result.unchanged.length} unchanged`];
  if (result.deleted.length) counts.push(`${result.deleted.length} deleted`);
  if (result.failed.length) counts.push(`${result.failed.length} failed`);
  lines.push(`${result.site.url}: ${counts.join(', ')}`);
  if (result.failing.length > 0 || result.uploaded.some((f) => f.deployment?.status === 'FAILED')) {
    lines.push('A function whose deployment failed keeps serving its last good version, if it had one.');
  }
  return lines.join('\n');
}

/** `api/x.ts:3:7: …`, the form editors and terminals turn into a link to the spot. */
function problem(
  path: string,
  what: string,
  error: { message: string; line: number; column: number } | undefined,
): string {
  const at = error && error.line > 0 ? `:${error.line}:${error.column}` : '';
  return `${path}${at}: ${what}: ${error?.message ?? 'no reason given'}`;
}
