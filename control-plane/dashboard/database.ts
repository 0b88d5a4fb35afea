// A site's database: run a statement and see a table, browse its tables read-only (database-browser.ts),
// or those of a preview's branch of it (`?branch=`),
// the applied migrations with their SQL, exports with their status and download, time travel, and the
// two-step delete. Exports, restores and deletion are for ADMINs.
import { ApiError, api, get, isAdmin } from './api.ts';
import { type Child, actionButton, badge, field, fill, form, formatBytes, h, statusLine, table, time } from './dom.ts';
import { type Route, href } from './router.ts';
import { browserSection } from './database-browser.ts';
import { siteFrame } from './sites.ts';
import { timeTravelSection } from './time-travel.ts';
import type {
  Database,
  DatabaseCompaction,
  DatabaseExport,
  DeletionChallenge,
  MigrationDetail,
  MigrationReceipt,
  QueryEnvelope,
  SiteDetail,
} from './types.ts';

/** A cell of a result row as text; NULL stands out from the string "null". */
function cellText(value: unknown): Child {
  if (value === null || value === undefined) return h('span', { class: 'null' }, 'NULL');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

export function resultTable(rows: Array<Record<string, unknown>>): HTMLElement {
  const columns: string[] = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  return table(
    'Query results',
    columns.map((name) => ({ label: name, cell: (row: Record<string, unknown>) => cellText(row[name]) })),
    rows,
    'The statement returned no rows.',
  );
}

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const base = `/v0/sites/${encodeURIComponent(site.id)}/databases`;
  const { databases } = await get<{ databases: Database[] }>(base);
  const database = databases[0];
  if (!database) {
    const status = statusLine();
    fill(
      body,
      h(
        'section',
        { class: 'card' },
        h('h2', null, 'Database'),
        h('p', null, 'This site has no database yet. Its functions reach it as ctx.db once it exists.'),
        site.status === 'ACTIVE'
          ? actionButton(
              'Create database',
              async () => {
                await api('POST', base);
                await render(root, route);
              },
              { status, class: 'primary' },
            )
          : h('p', { class: 'hint' }, 'Re-activate the site to create one.'),
        status.el,
      ),
    );
    return;
  }
  const dbPath = `${base}/${encodeURIComponent(database.id)}`;
  const branch = route.query.get('branch');
  if (branch) {
    // A preview's branch: its tables, read-only, and the way back to the database itself.
    fill(
      body,
      h(
        'p',
        { class: 'hint' },
        `The branch of this database that the preview ${branch.startsWith('t') ? 'of an instant' : 'of a deployment'} runs on (${branch}): what its functions write stays on it. `,
        h('a', { href: href('sites', site.id, 'database') }, 'Back to the database itself'),
      ),
      await browserSection(dbPath, branch),
    );
    return;
  }
  fill(
    body,
    querySection(dbPath),
    await browserSection(dbPath),
    await migrationsSection(dbPath),
    isAdmin() ? await exportsSection(dbPath) : null,
    await timeTravelSection(site, dbPath),
    isAdmin() ? deleteSection(site, dbPath, () => render(root, route)) : null,
    sizeSection(dbPath, database),
    h(
      'p',
      { class: 'hint' },
      'Database ',
      h('span', { class: 'mono' }, database.id),
      ' · ',
      badge(database.status),
      ' · created ',
      time(database.createdAt),
    ),
  );
}

/** The space the database takes against its limit, and compaction. */
function sizeSection(dbPath: string, database: Database): HTMLElement {
  const status = statusLine();
  const size = h(
    'p',
    { class: 'big-number' },
    `${formatBytes(database.sizeBytes)} of ${formatBytes(database.maxBytes)}`,
  );
  return h(
    'section',
    { class: 'card' },
    h('h2', null, 'Size'),
    size,
    h('meter', {
      min: 0,
      max: database.maxBytes,
      value: database.sizeBytes,
      high: database.maxBytes * 0.8,
      optimum: 0,
      'aria-label': 'Database size against its limit',
    }),
    h(
      'p',
      { class: 'hint' },
      'Writes past the limit fail with database_full. Space freed by deleted rows is given back by itself; compacting rewrites the database without any free space, and the site’s queries wait while it runs.',
    ),
    h(
      'div',
      { class: 'actions' },
      actionButton(
        'Compact',
        async () => {
          const done = await api<DatabaseCompaction>('POST', `${dbPath}/compact`);
          size.textContent = `${formatBytes(done.bytesAfter)} of ${formatBytes(database.maxBytes)}`;
          status.note(`Compacted: ${formatBytes(done.bytesBefore)} → ${formatBytes(done.bytesAfter)}.`);
        },
        { status },
      ),
    ),
    status.el,
  );
}

function querySection(dbPath: string): HTMLElement {
  const status = statusLine();
  const results = h('div', { class: 'results', 'aria-live': 'polite' });
  const sql = h('textarea', {
    name: 'sql',
    rows: 4,
    required: true,
    spellcheck: 'false',
    class: 'mono',
    placeholder: 'SELECT name FROM sqlite_schema',
  });
  const queryForm = form(
    { class: 'stack', 'aria-label': 'Run a query' },
    async () => {
      const answer = await api<QueryEnvelope>('POST', `${dbPath}/query`, { sql: sql.value }, { accept: [400] });
      if (!('success' in answer)) throw new ApiError(400, 'invalid_request', 'the query could not be run');
      if (!answer.success) {
        fill(results);
        status.error(answer.errors.map((e) => `${e.message} (${e.code})`).join('; ') || 'the statement failed');
        return;
      }
      const first = answer.result[0];
      const rows = first?.results ?? [];
      const meta = first?.meta;
      fill(
        results,
        resultTable(rows),
        h(
          'p',
          { class: 'hint' },
          `${rows.length} row${rows.length === 1 ? '' : 's'}`,
          meta ? ` · ${meta.changes} changed · ${meta.duration.toFixed(1)} ms` : '',
        ),
      );
    },
    status,
    h('div', { class: 'field' }, h('label', { for: 'sql-box' }, 'SQL'), Object.assign(sql, { id: 'sql-box' })),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Run query')),
  );
  // Ctrl/Cmd+Enter runs it from the box.
  sql.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) queryForm.requestSubmit();
  });
  return h(
    'section',
    { class: 'card' },
    h('h2', null, 'Query'),
    h('p', { class: 'hint' }, 'One statement at a time, on the live database.'),
    queryForm,
    status.el,
    results,
  );
}

async function migrationsSection(dbPath: string): Promise<HTMLElement> {
  const status = statusLine();
  const { applied } = await get<{ applied: MigrationReceipt[] }>(`${dbPath}/migrations`);
  const sqlEl = h('div');
  return h(
    'section',
    { class: 'card' },
    h('h2', null, 'Migrations'),
    table<MigrationReceipt>(
      'Applied migrations',
      [
        { label: 'Name', cell: (m) => h('span', { class: 'mono' }, m.name) },
        { label: 'Applied (UTC)', cell: (m) => m.appliedAt },
        {
          label: 'Checksum',
          cell: (m) => h('span', { class: 'mono small', title: m.checksum }, m.checksum.slice(0, 12)),
        },
        {
          label: 'SQL',
          class: 'actions-cell',
          cell: (m) =>
            m.sourceAvailable
              ? actionButton(
                  'Show SQL',
                  async () => {
                    const { migration } = await get<{ migration: MigrationDetail }>(
                      `${dbPath}/migrations/${encodeURIComponent(m.name)}`,
                    );
                    fill(
                      sqlEl,
                      h('h3', { class: 'mono' }, migration.name),
                      h('pre', { class: 'sql' }, migration.sql ?? '(not stored)'),
                    );
                  },
                  { status, ariaLabel: `Show the SQL of ${m.name}` },
                )
              : h('span', { class: 'hint' }, 'not stored'),
        },
      ],
      applied,
      'No migrations applied yet. `berth db migrate` applies a project’s migrations/NNNN_*.sql.',
    ),
    sqlEl,
    status.el,
  );
}

async function exportsSection(dbPath: string): Promise<HTMLElement> {
  const status = statusLine();
  const listEl = h('div');
  const load = async () => {
    const { exports } = await get<{ exports: DatabaseExport[] }>(`${dbPath}/exports`, { limit: 20 });
    fill(
      listEl,
      table<DatabaseExport>(
        'Exports',
        [
          { label: 'Started', cell: (e) => time(e.createdAt) },
          { label: 'Status', cell: (e) => badge(e.status) },
          { label: 'Size', cell: (e) => formatBytes(e.bytes) },
          {
            label: 'Download',
            class: 'actions-cell',
            cell: (e) => {
              if (e.status === 'ERROR') return e.error ?? 'failed';
              const slot = h('span');
              const button = actionButton(
                e.status === 'COMPLETE' ? 'Get download link' : 'Check again',
                async () => {
                  const { export: fresh } = await api<{ export: DatabaseExport }>(
                    'POST',
                    `${dbPath}/exports/${encodeURIComponent(e.id)}/reconcile`,
                  );
                  if (fresh.status !== 'COMPLETE' || !fresh.downloadUrl) return load();
                  fill(slot, h('a', { href: fresh.downloadUrl, download: `${e.id}.sql` }, 'Download SQL dump'));
                  button.remove();
                },
                { status, ariaLabel: `Download export ${e.id.slice(0, 8)}` },
              );
              return h('div', { class: 'actions' }, button, slot);
            },
          },
        ],
        exports,
        'No exports yet.',
      ),
    );
  };
  await load();
  return h(
    'section',
    { class: 'card' },
    h(
      'div',
      { class: 'section-head' },
      h('h2', null, 'Exports'),
      actionButton(
        'Start export',
        async () => {
          await api('POST', `${dbPath}/exports`);
          status.note('Export started: it takes a moment; check its status below.');
          await load();
        },
        { status },
      ),
    ),
    listEl,
    status.el,
  );
}

/** Step one asks the server for a confirmation code; step two sends it back, typed by the user. */
function deleteSection(site: SiteDetail, dbPath: string, after: () => Promise<void>): HTMLElement {
  const status = statusLine();
  const step = h('div');
  const start = actionButton(
    'Delete database…',
    async () => {
      const challenge = await api<DeletionChallenge>('POST', `${dbPath}/deletion-challenges`);
      fill(
        step,
        h(
          'p',
          null,
          'To delete the database of ',
          h('strong', null, site.name),
          ' for good, type this code (valid until ',
          time(challenge.expiresAt),
          '):',
        ),
        h('p', { class: 'code-display mono' }, challenge.confirmationCode),
        form(
          { class: 'stack', 'aria-label': 'Confirm the deletion' },
          async (el) => {
            await api('DELETE', dbPath, { confirmationCode: String(new FormData(el).get('code') ?? '').trim() });
            await after();
          },
          status,
          field('Confirmation code', () =>
            h('input', { name: 'code', required: true, autocomplete: 'off', spellcheck: 'false', class: 'mono' }),
          ),
          h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'danger' }, 'Delete database for good')),
        ),
      );
    },
    { status, class: 'danger' },
  );
  return h(
    'section',
    { class: 'card danger-zone' },
    h('h2', null, 'Delete the database'),
    h('p', null, 'Deletes its tables and data; the site’s files stay. This cannot be undone: export it first.'),
    start,
    step,
    status.el,
  );
}
