// A function's row as a deployment of one version of its source leaves it: the one writer of the
// `functions` table for both ways a source is deployed, a site's deployment switching many files
// (publish.ts) and a file written or deployed through the file API (functions.ts). It runs in the
// caller's write transaction, after the source was checked; the caller writes the version's module
// and publishes the change once that transaction has committed.
import type { SourceProblem } from '../../runtime-host/validate.ts';
import type { HotTx } from '../db/hot-sql.ts';
import { newId } from './deps.ts';
import type { FunctionRow } from './functions.ts';

/** What the check of a version's source found: what it serves, or why it cannot. */
export type CheckedVersion =
  | { ok: true; kind: 'api' | 'cron'; name: string; schedule: string | null }
  | { ok: false; kind: 'api' | 'cron'; name: string; problem: SourceProblem };

const COLUMNS =
  'id, site_id, path, name, kind, schedule, cron_last_scheduled_at, status, deployed_version_id, deployed_at, attempted_version_id, last_error, created_at, updated_at';

/**
 * Records the deployment of `versionId` at `path`: a version that passed its check is served from now
 * on (a new cron job starts from now, not catching up on earlier times); one that failed is recorded
 * as attempted with its problem, and the last good version, if any, stays in service.
 */
export async function recordFunctionVersion(
  sql: HotTx,
  siteId: string,
  path: string,
  versionId: string,
  checked: CheckedVersion,
  now: string,
): Promise<FunctionRow> {
  const existing = await sql.get<{ id: string }>(
    'SELECT id FROM functions WHERE site_id = ? AND path = ?',
    siteId,
    path,
  );
  const id = existing?.id ?? newId();
  if (!existing)
    await sql.run(
      `INSERT INTO functions (${COLUMNS})
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      id,
      siteId,
      path,
      checked.name,
      checked.kind,
      checked.ok ? checked.schedule : null,
      checked.ok && checked.kind === 'cron' ? now : null,
      checked.ok ? 'ACTIVE' : 'FAILED',
      checked.ok ? versionId : null,
      checked.ok ? now : null,
      versionId,
      checked.ok ? null : JSON.stringify(checked.problem),
      now,
      now,
    );
  else if (checked.ok)
    await sql.run(
      `UPDATE functions SET status = 'ACTIVE', schedule = ?, deployed_version_id = ?, deployed_at = ?, attempted_version_id = ?, last_error = NULL, updated_at = ?,
       cron_last_scheduled_at = COALESCE(cron_last_scheduled_at, ?) WHERE id = ?`,
      checked.schedule,
      versionId,
      now,
      versionId,
      now,
      checked.kind === 'cron' ? now : null,
      id,
    );
  else
    await sql.run(
      "UPDATE functions SET status = 'FAILED', attempted_version_id = ?, last_error = ?, updated_at = ? WHERE id = ?",
      versionId,
      JSON.stringify(checked.problem),
      now,
      id,
    );
  return (await sql.get<FunctionRow>(`SELECT ${COLUMNS} FROM functions WHERE id = ?`, id))!;
}
