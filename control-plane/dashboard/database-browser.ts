// The database page's browser: the site's tables with their columns and row counts, and one table's
// rows a page at a time, sorted by a column and filtered by one. Every read is a call of the query API
// with readOnly, so the database itself refuses anything that would write, under the same limits and
// access checks as any other call. Table and column names come from the tenant's schema and are quoted
// as identifiers; filter values travel as bound parameters.
import { ApiError, api } from './api.ts';
import { type Child, field, fill, formatBytes, h, run, statusLine } from './dom.ts';
import type { QueryEnvelope } from './types.ts';

const PAGE_ROWS = 50;
/** Characters of a value shown; the rest is cut, saying how long it is. */
const SHOWN_CHARS = 200;
/** Tables counted per statement (a compound SELECT may have at most 500 parts). */
const COUNTED_PER_STATEMENT = 100;
/** Berth's own migration ledger: the Migrations section shows it. */
const LEDGER_TABLE = '_berth_migrations';

interface ColumnInfo {
  name: string;
  type: string;
  /** The column's place in the primary key, from 1; 0 when it is not part of it. */
  pk: number;
  notNull: boolean;
}

interface TableInfo {
  name: string;
  columns: ColumnInfo[];
  rows: number;
}

type Row = Record<string, unknown>;

/** A name as an SQL identifier: in double quotes, its own double quotes doubled. */
export const quoteName = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** The database read: the site's (its API path), or a preview's branch of it. */
interface Source {
  dbPath: string;
  branch: string | null;
}

/** Runs one statement that only reads; its failure is thrown with the database's message and code. */
async function read(source: Source, sql: string, params: Array<string | number> = []): Promise<Row[]> {
  const answer = await api<QueryEnvelope>(
    'POST',
    `${source.dbPath}/query`,
    { sql, params, readOnly: true, ...(source.branch ? { branch: source.branch } : {}) },
    { accept: [400] },
  );
  if (!('success' in answer)) throw new ApiError(400, 'invalid_request', 'the database could not be read');
  if (!answer.success) {
    const first = answer.errors[0];
    throw new ApiError(400, first?.code ?? 'statement_failed', first?.message ?? 'the statement failed');
  }
  return answer.result[0]?.results ?? [];
}

/**
 * The tenant's tables (and virtual tables) with their columns, then their row counts. SQLite's own
 * tables, the replicator's and the migration ledger are Berth's, not listed.
 */
async function loadTables(source: Source): Promise<TableInfo[]> {
  const columns = await read(
    source,
    `SELECT t.name AS tbl, c.name AS name, c.type AS type, c.pk AS pk, c."notnull" AS not_null
     FROM pragma_table_list AS t LEFT JOIN pragma_table_info(t.name) AS c
     WHERE t.schema = 'main' AND t.type IN ('table', 'virtual')
       AND t.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND t.name NOT LIKE '\\_litestream\\_%' ESCAPE '\\'
       AND t.name <> ?
     ORDER BY t.name, c.cid`,
    [LEDGER_TABLE],
  );
  const tables = new Map<string, TableInfo>();
  for (const row of columns) {
    const name = String(row.tbl);
    const table = tables.get(name) ?? { name, columns: [], rows: 0 };
    tables.set(name, table);
    if (row.name === null || row.name === undefined) continue;
    table.columns.push({
      name: String(row.name),
      type: String(row.type ?? ''),
      pk: Number(row.pk),
      notNull: Number(row.not_null) === 1,
    });
  }
  const list = [...tables.values()];
  for (let i = 0; i < list.length; i += COUNTED_PER_STATEMENT) {
    const some = list.slice(i, i + COUNTED_PER_STATEMENT);
    const counts = await read(
      source,
      some.map((t) => `SELECT ? AS tbl, count(*) AS n FROM ${quoteName(t.name)}`).join(' UNION ALL '),
      some.map((t) => t.name),
    );
    for (const row of counts) tables.get(String(row.tbl))!.rows = Number(row.n);
  }
  return list;
}

/** How rows keep one order from page to page: the primary key, else the rowid (unless a column takes its names). */
function tiebreak(table: TableInfo): string[] {
  const key = table.columns.filter((c) => c.pk > 0).sort((a, b) => a.pk - b.pk);
  if (key.length > 0) return key.map((c) => quoteName(c.name));
  const taken = new Set(table.columns.map((c) => c.name.toLowerCase()));
  const rowid = ['rowid', '_rowid_', 'oid'].find((name) => !taken.has(name));
  return rowid ? [rowid] : [];
}

interface View {
  table: TableInfo;
  offset: number;
  sort: { column: string; descending: boolean } | null;
  filter: { column: string; match: 'equals' | 'contains'; value: string } | null;
  /** Rows matching the filter, counted when the table or the filter changes. */
  total: number;
}

/** The WHERE clause of the view's filter and its parameters. */
function where(view: View): { sql: string; params: string[] } {
  const filter = view.filter;
  if (!filter) return { sql: '', params: [] };
  if (filter.match === 'equals') return { sql: ` WHERE ${quoteName(filter.column)} = ?`, params: [filter.value] };
  return {
    sql: ` WHERE ${quoteName(filter.column)} LIKE ? ESCAPE '\\'`,
    params: [`%${filter.value.replace(/[\\%_]/g, '\\$&')}%`],
  };
}

/** A page of the view's rows: each column's type, length and first characters (a BLOB's bytes are not read). */
async function loadPage(source: Source, view: View): Promise<Row[]> {
  const selected = view.table.columns
    .map((c, i) => {
      const q = quoteName(c.name);
      return `typeof(${q}) AS "t${i}", length(${q}) AS "n${i}", CASE WHEN typeof(${q}) = 'blob' THEN NULL ELSE substr(${q}, 1, ${SHOWN_CHARS}) END AS "v${i}"`;
    })
    .join(', ');
  const filter = where(view);
  const order = [
    ...(view.sort ? [`${quoteName(view.sort.column)} ${view.sort.descending ? 'DESC' : 'ASC'}`] : []),
    ...tiebreak(view.table),
  ];
  return read(
    source,
    `SELECT ${selected} FROM ${quoteName(view.table.name)}${filter.sql}${order.length > 0 ? ` ORDER BY ${order.join(', ')}` : ''} LIMIT ${PAGE_ROWS} OFFSET ?`,
    [...filter.params, view.offset],
  );
}

async function countRows(source: Source, view: View): Promise<number> {
  const filter = where(view);
  const [row] = await read(
    source,
    `SELECT count(*) AS n FROM ${quoteName(view.table.name)}${filter.sql}`,
    filter.params,
  );
  return Number(row?.n ?? 0);
}

/** A value as the browser shows it: NULL apart from the text "null", a BLOB as its size, long text cut. */
function cell(row: Row, i: number): Child {
  const type = row[`t${i}`];
  const length = Number(row[`n${i}`]);
  if (type === 'null') return h('span', { class: 'null' }, 'NULL');
  if (type === 'blob') return h('span', { class: 'null' }, `BLOB, ${formatBytes(length)}`);
  const text = String(row[`v${i}`]);
  if (length <= SHOWN_CHARS) return text;
  return [text, '…', h('span', { class: 'hint' }, ` (${length.toLocaleString()} characters)`)];
}

function columnsList(table: TableInfo): HTMLElement {
  return h(
    'ul',
    { class: 'column-list' },
    table.columns.map((c) =>
      h(
        'li',
        null,
        h('span', { class: 'mono' }, c.name),
        c.type ? ` ${c.type}` : '',
        c.pk > 0 ? [' ', h('span', { class: 'badge' }, 'primary key')] : '',
        c.notNull ? [' ', h('span', { class: 'badge' }, 'not null')] : '',
      ),
    ),
  );
}

/** The Tables section: every table of the tenant's, and the rows of the one being browsed. */
export async function browserSection(dbPath: string, branch: string | null = null): Promise<HTMLElement> {
  const source: Source = { dbPath, branch };
  const status = statusLine();
  const listEl = h('div');
  const rowsEl = h('div', { 'aria-live': 'polite' });
  const section = h(
    'section',
    { class: 'card', 'aria-labelledby': 'tables-heading' },
    h('h2', { id: 'tables-heading' }, branch ? 'Tables of the branch' : 'Tables'),
    h('p', { class: 'hint' }, `Read-only: browsing never changes the ${branch ? 'branch' : 'database'}.`),
    listEl,
    status.el,
    rowsEl,
  );
  let tables: TableInfo[];
  try {
    tables = await loadTables(source);
  } catch (err) {
    status.error(err instanceof Error ? err.message : String(err));
    return section;
  }
  if (tables.length === 0) {
    fill(listEl, h('p', { class: 'empty' }, 'No tables yet. Create them with a migration or a query.'));
    return section;
  }

  const show = async (next: View, recount: boolean) => {
    if (recount) next.total = await countRows(source, next);
    fill(rowsEl, rowsView(next, await loadPage(source, next)));
  };
  const change = (button: HTMLButtonElement | null, next: View, recount = false) =>
    run(button, () => show(next, recount), status);

  const rowsView = (current: View, rows: Row[]): Child => {
    const { table } = current;
    const first = current.total === 0 ? 0 : current.offset + 1;
    const last = current.offset + rows.length;
    const pages = Math.max(1, Math.ceil(current.total / PAGE_ROWS));
    const page = Math.floor(current.offset / PAGE_ROWS) + 1;
    const previous = h('button', { type: 'button', disabled: current.offset === 0 }, 'Previous page');
    previous.addEventListener('click', () =>
      change(previous, { ...current, offset: Math.max(0, current.offset - PAGE_ROWS) }),
    );
    const next = h('button', { type: 'button', disabled: last >= current.total }, 'Next page');
    next.addEventListener('click', () => change(next, { ...current, offset: current.offset + PAGE_ROWS }));
    return [
      h('h3', null, 'Rows of ', h('span', { class: 'mono' }, table.name)),
      filterForm(current),
      h(
        'div',
        { class: 'actions pager' },
        previous,
        h(
          'p',
          { class: 'position' },
          current.total === 0 ? 'No rows' : `Rows ${first}–${last} of ${current.total} · page ${page} of ${pages}`,
          current.filter ? ` (filtered)` : '',
        ),
        next,
      ),
      rows.length === 0
        ? h('p', { class: 'empty' }, current.filter ? 'No rows match the filter.' : 'This table has no rows.')
        : rowsTable(current, rows),
    ];
  };

  const rowsTable = (current: View, rows: Row[]): HTMLElement => {
    const { table, sort } = current;
    const headers = table.columns.map((c) => {
      const sorted = sort?.column === c.name ? (sort.descending ? 'descending' : 'ascending') : null;
      const descending = sorted === 'ascending';
      const button = h(
        'button',
        {
          type: 'button',
          class: 'sort-button',
          'aria-label': `Sort by ${c.name}, ${descending ? 'descending' : 'ascending'}`,
        },
        c.name,
        sorted ? h('span', { 'aria-hidden': 'true' }, sorted === 'ascending' ? ' ▲' : ' ▼') : '',
      );
      button.addEventListener('click', () =>
        change(button, { ...current, offset: 0, sort: { column: c.name, descending } }),
      );
      return h('th', { scope: 'col', 'aria-sort': sorted ?? 'none' }, button);
    });
    return h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'rows-table' },
        h('caption', { class: 'visually-hidden' }, `Rows of ${table.name}`),
        h('thead', null, h('tr', null, headers)),
        h(
          'tbody',
          null,
          rows.map((row) =>
            h(
              'tr',
              null,
              table.columns.map((c, i) => h('td', { 'data-label': c.name }, cell(row, i))),
            ),
          ),
        ),
      ),
    );
  };

  const filterForm = (current: View): HTMLElement => {
    const column = h(
      'select',
      { name: 'column' },
      current.table.columns.map((c) =>
        h('option', { value: c.name, selected: current.filter?.column === c.name }, c.name),
      ),
    );
    const match = h(
      'select',
      { name: 'match' },
      h('option', { value: 'equals', selected: current.filter?.match === 'equals' }, 'equals'),
      h('option', { value: 'contains', selected: current.filter?.match === 'contains' }, 'contains'),
    );
    const value = h('input', { name: 'value', value: current.filter?.value ?? '', autocomplete: 'off' });
    const clear = h('button', { type: 'button' }, 'Clear filter');
    const el = h(
      'form',
      { class: 'row-form filter-form', 'aria-label': 'Filter the rows' },
      field('Filter column', () => column),
      field('Match', () => match),
      field('Value', () => value),
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Filter'), current.filter ? clear : null),
    );
    clear.addEventListener('click', () => change(clear, { ...current, offset: 0, filter: null }, true));
    el.addEventListener('submit', (event) => {
      event.preventDefault();
      const filter = {
        column: column.value,
        match: match.value === 'contains' ? ('contains' as const) : ('equals' as const),
        value: value.value,
      };
      void change(el.querySelector('button[type=submit]'), { ...current, offset: 0, filter }, true);
    });
    return el;
  };

  fill(
    listEl,
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'tables-table' },
        h('caption', { class: 'visually-hidden' }, 'Tables'),
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            h('th', { scope: 'col' }, 'Table'),
            h('th', { scope: 'col' }, 'Columns'),
            h('th', { scope: 'col' }, 'Rows'),
            h('th', { scope: 'col', class: 'actions-cell' }, h('span', { class: 'visually-hidden' }, 'Browse')),
          ),
        ),
        h(
          'tbody',
          null,
          tables.map((table) => {
            const browse = h('button', { type: 'button', 'aria-label': `Browse the rows of ${table.name}` }, 'Browse');
            browse.addEventListener('click', () =>
              change(browse, { table, offset: 0, sort: null, filter: null, total: 0 }, true),
            );
            return h(
              'tr',
              { 'data-table': table.name },
              h('th', { scope: 'row', class: 'mono' }, table.name),
              h('td', { 'data-label': 'Columns' }, columnsList(table)),
              h('td', { 'data-label': 'Rows' }, String(table.rows)),
              h('td', { class: 'actions-cell' }, browse),
            );
          }),
        ),
      ),
    ),
  );
  return section;
}
