// Console output of functions, kept per site and bounded (see function-log-buffer.ts): listed newest first.
import type { Actor, Deps } from './deps.ts';
import type { LogRow } from './function-log-buffer.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { requireSite } from './site-rows.ts';

export interface FunctionLogLine {
  id: number;
  functionPath: string | null;
  requestId: string | null;
  level: string;
  message: string;
  createdAt: string;
}

const toLine = (row: LogRow): FunctionLogLine => ({
  id: row.id,
  functionPath: row.function_path,
  requestId: row.request_id,
  level: row.level,
  message: row.message,
  createdAt: row.created_at,
});

export async function listLogs(deps: Deps, actor: Actor, siteId: string, page: PageRequest) {
  await requireSite(deps, actor, siteId);
  await deps.functionLogs.flush();
  const query = deps.db('function_logs').where({ site_id: siteId }).orderBy('id', 'desc');
  const { items, pagination } = await paginate(query, page, toLine);
  return { logs: items, pagination };
}
