// Restoring a site to a time: the user picks a moment in their own time zone, sees what the site's
// files were then (the snapshot API), and only then confirms; the restore is sent for that same
// instant, in UTC. A time before the site's history says from when it is available.
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
async function snapshotAt(siteId: string, at: string): Promise<{ snapshot: Snapshot; files: SnapshotFile[] }> {
  const files: SnapshotFile[] = [];
  let snapshot: Snapshot | undefined;
  let offset: number | null = 0;
  try {
    while (offset !== null && files.length < MAX_LISTED) {
      const page: { snapshot: Snapshot; files: SnapshotFile[]; pagination: Pagination } = await get(
        `/v0/sites/${encodeURIComponent(siteId)}/snapshot`,
        { at, limit: 200, offset },
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

/** The card: the time, the files at that time, then the button that restores them. */
export function restoreCard(siteId: string, restored: () => Promise<void>): HTMLElement {
  const status = statusLine();
  const previewEl = h('div', { class: 'snapshot' });
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const utcEl = h('small', { class: 'hint mono', 'aria-live': 'polite' });
  const input = h('input', { type: 'datetime-local', name: 'at', step: 1, required: true });
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
    h(
      'div',
      { class: 'actions' },
      actionButton(
        'Restore the site to this time',
        async () => {
          const { deployment } = await api<{ deployment: Deployment }>(
            'POST',
            `/v0/sites/${encodeURIComponent(siteId)}/restore`,
            { at: snapshot.at },
          );
          fill(previewEl);
          await restored();
          status.note(
            `Restored: the site is what it was at ${localTime(snapshot.at)}, as deployment ${deployment.shortId}.`,
          );
        },
        { status, class: 'primary' },
      ),
      actionButton('Cancel', async () => fill(previewEl)),
    ),
  ];

  return h(
    'section',
    { class: 'card' },
    h('h2', null, 'Restore to a time'),
    h(
      'p',
      { class: 'hint' },
      'Puts the site’s files and functions back to what they were at that moment, as a new deployment. The files are shown first.',
    ),
    form(
      { class: 'row-form restore-form', 'aria-label': 'Restore to a time' },
      async () => {
        fill(previewEl);
        const { snapshot, files } = await snapshotAt(siteId, localToUtc(input.value));
        fill(previewEl, preview(snapshot, files));
      },
      status,
      field('Time', () => input, `Your local time (${zone}), to the second.`),
      h('button', { type: 'submit' }, 'Show the files at that time'),
    ),
    utcEl,
    status.el,
    previewEl,
  );
}
