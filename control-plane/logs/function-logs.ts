// Console output of functions, kept per site and bounded (see function-log-buffer.ts): listed newest
// first, or read after a line id, oldest first, by a live stream; both with the same filters.
import type { Knex } from 'knex';
import type { Actor, Deps } from '../deps.ts';
import type { LogRow } from './function-log-buffer.ts';
import { type PageRequest, paginate } from '../services/pagination.ts';
import { requireSite } from '../services/site-rows.ts';

export interface FunctionLogLine {
  id: number;
  functionPath: string | null;
  requestId: string | null;
  level: string;
  message: string;
  createdAt: string;
}

/** Every filter given must match; `q` is a substring of the message, in any case. */
export interface LogFilter {
  function?: string | undefined;
  level?: string | undefined;
  q?: string | undefined;
}

const toLine = (row: LogRow): FunctionLogLine => ({
  id: row.id,
  functionPath: row.function_path,
  requestId: row.request_id,
  level: row.level,
  message: row.message,
  createdAt: row.created_at,
});

/** `q` as a LIKE pattern that matches it literally. */
const containing = (text: string) => `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

function filtered(deps: Pick<Deps, 'db'>, siteId: string, filter: LogFilter): Knex.QueryBuilder {
  const query = deps.db('function_logs').where({ site_id: siteId });
  if (filter.function !== undefined) query.andWhere('function_path', filter.function);
  if (filter.level !== undefined) query.andWhere('level', filter.level);
  if (filter.q !== undefined) query.andWhereRaw(`LOWER(message) LIKE ? ESCAPE '\\'`, [containing(filter.q)]);
  return query;
}

export async function listLogs(
  deps: Deps,
  actor: Actor,
  siteId: string,
  page: PageRequest,
  filter: LogFilter = {},
): Promise<{ logs: FunctionLogLine[]; pagination: { hasMore: boolean; nextOffset: number | null } }> {
  await requireSite(deps, actor, siteId);
  await deps.functionLogs.flush();
  const query = filtered(deps, siteId, filter).orderBy('id', 'desc');
  const { items, pagination } = await paginate(query, page, toLine);
  return { logs: items, pagination };
}

/** The site's lines after `after` that pass `filter`, oldest first, at most `limit`. */
export async function linesAfter(
  deps: Pick<Deps, 'db'>,
  siteId: string,
  after: number,
  filter: LogFilter,
  limit: number,
): Promise<FunctionLogLine[]> {
  const rows = (await filtered(deps, siteId, filter).andWhere('id', '>', after).orderBy('id').limit(limit)) as LogRow[];
  return rows.map(toLine);
}

/** The id of the site's newest stored line, or 0. */
export async function newestLineId(deps: Pick<Deps, 'db'>, siteId: string): Promise<number> {
  const row = (await deps.db('function_logs').where({ site_id: siteId }).max('id as id').first()) as
    | { id: number | string | null }
    | undefined;
  return Number(row?.id ?? 0);
}
