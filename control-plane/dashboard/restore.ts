// Restoring a site to a time: the user picks a moment in their own time zone, sees what the site's
// files were then (the snapshot API), and, with "the database too", each table's rows then and now,
// and only then confirms; the restore is sent for that same instant, in UTC. A time before the site's
// history says from when it is available. A whole restore can be undone from here at once.
import { ApiError, api, get } from './api.ts';
import { type Child, actionButton, field, fill, form, formatBytes, h, statusLine, table, time } from './dom.ts';
import type { Deployment, Pagination, Snapshot, SnapshotFile } from './types.ts';

/** Files listed in the preview at most; the count says how many there are in all. */
const MAX_LISTED = 2000;

/** A `datetime-local` value, read in the browser's time zone, as an RFC 3339 instant in UTC. */
export function localToUtc(value: string): string {
  const date = new Date(value);
  if (value === '' || Number.isNaN(date.getTime())) throw new Error('Choose a date and a time.');
  return date.toISOString();
}

/** An instant as a `datetime-local` value in the browser's time zone, to the second. */
export function utcToLocal(iso: string): string {
  const date = new Date(iso);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
}

export const localTime = (iso: string): string => new Date(iso).toLocaleString();

/** The snapshot at `at` and its files (up to MAX_LISTED); a time before the history says from when. */
async function snapshotAt(
  siteId: string,
  at: string,
  database: boolean,
): Promise<{ snapshot: Snapshot; files: SnapshotFile[] }> {
  const files: SnapshotFile[] = [];
  let snapshot: Snapshot | undefined;
  let offset: number | null = 0;
  try {
    while (offset !== null && files.length < MAX_LISTED) {
      const page: { snapshot: Snapshot; files: SnapshotFile[]; pagination: Pagination } = await get(
        `/v0/sites/${encodeURIComponent(siteId)}/snapshot`,
        { at, limit: 200, offset, ...(database && offset === 0 ? { database: 'true' } : {}) },
      );
      snapshot ??= page.snapshot;
      files.push(...page.files);
      offset = page.pagination.nextOffset;
    }
  } catch (err) {
    const from = err instanceof ApiError ? err.details?.availableFrom : undefined;
    if (err instanceof ApiError && err.code === 'before_history' && typeof from === 'string')
      throw new Error(`${err.message}. The site can be restored to any time from ${localTime(from)} on.`);
    throw err;
  }
  return { snapshot: snapshot!, files };
}

/** What a whole restore would do to the database: each table's rows then and now, or why it cannot. */
function databaseSide(database: NonNullable<Snapshot['database']>): Child[] {
  if (!database.restorable)
    return [
      h('h3', null, 'The database'),
      h(
        'p',
        { class: 'status error' },
        database.reason ?? 'The database cannot be restored to that second.',
        database.availableFrom ? ` Both can be restored to any time from ${localTime(database.availableFrom)} on.` : '',
      ),
    ];
  const changed = (t: { rowsThen: number | null; rowsNow: number | null }) =>
    t.rowsThen === null
      ? 'made since: it goes'
      : t.rowsNow === null
        ? 'dropped since: it comes back'
        : t.rowsThen === t.rowsNow
          ? 'same count'
          : `${t.rowsNow - t.rowsThen > 0 ? '+' : ''}${t.rowsNow - t.rowsThen} rows since`;
  return [
    h('h3', null, 'The database at ', time(database.at)),
    table(
      'Tables then and now',
      [
        { label: 'Table', cell: (t) => h('span', { class: 'mono' }, t.name) },
        { label: 'Rows then', cell: (t) => (t.rowsThen === null ? '—' : String(t.rowsThen)) },
        { label: 'Rows now', cell: (t) => (t.rowsNow === null ? '—' : String(t.rowsNow)) },
        { label: 'Change', cell: changed },
      ],
      database.tables,
      'The database had no tables then, and has none now.',
    ),
    h(
      'p',
      { class: 'hint' },
      'Every table goes back to that second, its schema with it: what was written since is gone from the database (the restore can be undone).',
    ),
  ];
}

/** The card: the time, the files (and the database) at that time, then the button that restores them. */
export function restoreCard(siteId: string, restored: () => Promise<void>, hasDatabase = false): HTMLElement {
  const status = statusLine();
  const previewEl = h('div', { class: 'snapshot' });
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const utcEl = h('small', { class: 'hint mono', 'aria-live': 'polite' });
  const input = h('input', { type: 'datetime-local', name: 'at', step: 1, required: true });
  const withDatabase = h('input', { type: 'checkbox', name: 'database', id: 'restore-database' });
  withDatabase.addEventListener('change', () => fill(previewEl));
  // A preview shown for another time is not what the button would restore: it goes when the time changes.
  input.addEventListener('input', () => {
    fill(previewEl);
    status.clear();
    try {
      utcEl.textContent = `= ${localToUtc(input.value)} (UTC)`;
    } catch {
      utcEl.textContent = '';
    }
  });

  const whole = (snapshot: Snapshot) => snapshot.database !== undefined;
  const preview = (snapshot: Snapshot, files: SnapshotFile[]): Child[] => [
    h(
      'h3',
      null,
      'The site at ',
      time(snapshot.at),
      `: ${snapshot.files} ${snapshot.files === 1 ? 'file' : 'files'}, ${formatBytes(snapshot.bytes)}`,
    ),
    table<SnapshotFile>(
      'Files at that time',
      [
        { label: 'Path', cell: (f) => h('span', { class: 'mono' }, f.path) },
        { label: 'Size', cell: (f) => formatBytes(f.bytes) },
        { label: 'Type', cell: (f) => h('span', { class: 'mono' }, f.contentType) },
      ],
      files,
      'The site had no files at that time: restoring removes its web/, api/ and cron/ files.',
    ),
    snapshot.files > files.length
      ? h('p', { class: 'hint' }, `The first ${files.length} are listed; the restore puts back all ${snapshot.files}.`)
      : null,
    snapshot.database ? databaseSide(snapshot.database) : null,
    h(
      'div',
      { class: 'actions' },
      snapshot.database && !snapshot.database.restorable
        ? null
        : actionButton(
            whole(snapshot) ? 'Restore the site and its database to this time' : 'Restore the site to this time',
            async () => {
              const { deployment } = await api<{ deployment: Deployment }>(
                'POST',
                `/v0/sites/${encodeURIComponent(siteId)}/restore`,
                { at: snapshot.at, ...(whole(snapshot) ? { database: true } : {}) },
              );
              fill(previewEl, deployment.databaseRestore ? undoPart(deployment.databaseRestore.restoredFrom) : null);
              await restored();
              status.note(
                `Restored: the site is what it was at ${localTime(snapshot.at)}${deployment.databaseRestore ? ', its database too' : ''}, as deployment ${deployment.shortId}.`,
              );
            },
            { status, class: 'primary' },
          ),
      actionButton('Cancel', async () => fill(previewEl)),
    ),
  ];

  /** After a whole restore: putting the site and its database back as they were just before it. */
  const undoPart = (restoredFrom: string): Child =>
    h(
      'div',
      { class: 'actions' },
      actionButton(
        'Undo: back to just before the restore',
        async () => {
          const { deployment } = await api<{ deployment: Deployment }>(
            'POST',
            `/v0/sites/${encodeURIComponent(siteId)}/restore`,
            { at: restoredFrom, database: true },
          );
          fill(previewEl);
          await restored();
          status.note(`Undone: the site and its database are back as they were, as deployment ${deployment.shortId}.`);
        },
        { status },
      ),
    );

  return h(
    'section',
    { class: 'card' },
    h('h2', null, 'Restore to a time'),
    h(
      'p',
      { class: 'hint' },
      hasDatabase
        ? 'Puts the site’s files and functions back to what they were at that moment, as a new deployment, and its database too if you choose. What each would change is shown first.'
        : 'Puts the site’s files and functions back to what they were at that moment, as a new deployment. The files are shown first.',
    ),
    form(
      { class: 'row-form restore-form', 'aria-label': 'Restore to a time' },
      async () => {
        fill(previewEl);
        const { snapshot, files } = await snapshotAt(siteId, localToUtc(input.value), withDatabase.checked);
        fill(previewEl, preview(snapshot, files));
      },
      status,
      field('Time', () => input, `Your local time (${zone}), to the second.`),
      hasDatabase
        ? h('label', { class: 'check', for: 'restore-database' }, withDatabase, ' The database too, to the same second')
        : null,
      h('button', { type: 'submit' }, 'Show the site at that time'),
    ),
    utcEl,
    status.el,
    previewEl,
  );
}
