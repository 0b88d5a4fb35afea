// Offset pagination shared by every list: fetch one row more than asked to learn whether more exist.
import type { Knex } from 'knex';

export interface PageRequest {
  limit: number;
  offset: number;
}

export interface Pagination {
  hasMore: boolean;
  nextOffset: number | null;
}

export async function paginate<Row, Item>(
  query: Knex.QueryBuilder,
  page: PageRequest,
  toItem: (row: Row) => Item,
): Promise<{ items: Item[]; pagination: Pagination }> {
  const rows = (await query.limit(page.limit + 1).offset(page.offset)) as Row[];
  const hasMore = rows.length > page.limit;
  const items = rows.slice(0, page.limit).map(toItem);
  return { items, pagination: { hasMore, nextOffset: hasMore ? page.offset + page.limit : null } };
}
