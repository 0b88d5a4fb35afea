// A site's Deployments tab: its history newest first, a page at a time, with single-file writes hidden
// unless asked for; each entry's kind, status (a failure with each file's error), author, message and
// size; "Roll back to this" on a published one the site is not at; and restoring the site to a time
// (restore.ts). One deployment's page is deployment.ts.
import { get, isAdmin } from './api.ts';
import { type Child, actionButton, badge, fill, formatBytes, h, run, statusLine, table, time } from './dom.ts';
import { restoreCard } from './restore.ts';
import { canRollBackTo, rollBack } from './rollback.ts';
import { type Route, href } from './router.ts';
import { siteFrame } from './sites.ts';
import type { Deployment, FileProblem, Pagination } from './types.ts';

/** Entries fetched per request. */
const PAGE = 50;
/** Requests one "Load more" makes at most while the filter hides what they bring. */
const MAX_PAGES_PER_LOAD = 10;

export const KIND_LABELS: Record<Deployment['kind'], string> = {
  DEPLOY: 'Deployment',
  FILE: 'File write',
  PROMOTE: 'Rollback',
  RESTORE: 'Restore to a time',
  BASELINE: 'Starting point',
};

/** Who made it, as a person reads it: the user's email, or which key or login. */
export function authorLabel(author: string): Child {
  const user = /^user:[^ ]+ \((.*)\)$/.exec(author);
  if (user) return h('span', { title: author }, user[1]!);
  if (author === 'system') return 'Berth';
  if (author.startsWith('cli:'))
    return h('span', { title: author }, 'CLI login ', h('span', { class: 'mono' }, author.slice(4, 12)));
  if (author.startsWith('function:')) return h('span', { title: author }, 'a function');
  return h('span', { title: author }, 'API key ', h('span', { class: 'mono' }, author.slice(0, 8)));
}

/** Each file's error at its place (line 0: not at a place in the file). */
export const problemList = (errors: FileProblem[]): HTMLElement =>
  h(
    'ul',
    { class: 'problems' },
    errors.map((e) =>
      h(
        'li',
        null,
        h('span', { class: 'mono' }, e.line > 0 ? `${e.path}:${e.line}:${e.column}` : e.path),
        ' ',
        e.message,
      ),
    ),
  );

/** Status and, for the one the site is at, the word Current: never colour alone. */
export const stateBadges = (d: Deployment): Child => [badge(d.status), d.current ? [' ', badge('Current')] : null];

export const previewLink = (d: Deployment): HTMLElement =>
  h(
    'a',
    {
      href: d.previewUrl,
      target: '_blank',
      rel: 'noopener noreferrer',
      'aria-label': `Preview ${d.shortId}`,
    },
    'Preview',
  );

/** A restore's message is its instant in UTC: shown in the reader's time instead. */
export const messageOf = (d: Deployment): Child =>
  d.kind === 'RESTORE' && d.restoredAt
    ? ['Back to ', time(d.restoredAt)]
    : (d.message ?? h('span', { class: 'hint' }, '–'));

export const deploymentHref = (d: Deployment): string => href('sites', d.siteId, 'deployments', d.id);

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const base = `/v0/sites/${encodeURIComponent(site.id)}/deployments`;
  // A site with a database can be restored with it, by the account's administrators (as databases are).
  const { databases } = await get<{ databases: unknown[] }>(`/v0/sites/${encodeURIComponent(site.id)}/databases`);
  const hasDatabase = databases.length > 0 && isAdmin();
  const status = statusLine();
  const listEl = h('div', { class: 'loading stacked-table' }, 'Loading deployments…');
  const moreEl = h('div', { class: 'actions' });
  let loaded: Deployment[] = [];
  let nextOffset: number | null = 0;

  const only = h('input', { type: 'checkbox', id: 'deployments-only', checked: true });
  const visible = () => (only.checked ? loaded.filter((d) => d.kind !== 'FILE') : loaded);

  const draw = () => {
    const shown = visible();
    const hidden = loaded.length - shown.length;
    fill(
      listEl,
      table<Deployment>(
        'Deployments',
        [
          {
            label: 'Deployment',
            cell: (d) => [
              h('a', { href: deploymentHref(d), class: 'mono', 'aria-label': `Deployment ${d.shortId}` }, d.shortId),
              h('div', { class: 'hint' }, KIND_LABELS[d.kind]),
            ],
          },
          {
            label: 'Status',
            cell: (d) => [stateBadges(d), d.errors && d.errors.length > 0 ? problemList(d.errors) : null],
          },
          { label: 'Message', class: 'message-cell', cell: messageOf },
          { label: 'Author', cell: (d) => authorLabel(d.author) },
          {
            label: 'Files',
            class: 'nowrap',
            cell: (d) => [
              `${d.files} ${d.files === 1 ? 'file' : 'files'}`,
              h('div', { class: 'hint' }, formatBytes(d.bytes)),
            ],
          },
          {
            label: 'When',
            cell: (d) => [
              time(d.publishedAt ?? d.createdAt),
              h('div', { class: 'hint' }, d.publishedAt ? 'published' : 'started'),
            ],
          },
          {
            label: 'Actions',
            class: 'actions-cell',
            cell: (d) => [
              previewLink(d),
              canRollBackTo(d)
                ? [
                    ' ',
                    actionButton(
                      'Roll back to this',
                      async () => {
                        const made = await rollBack(site.id, d);
                        if (!made) return;
                        await reload();
                        status.note(`Rolled back to ${d.shortId}: the site is what it was right after it.`);
                      },
                      { status, class: 'small-button', ariaLabel: `Roll back to ${d.shortId}` },
                    ),
                  ]
                : null,
            ],
          },
        ],
        shown,
        loaded.length === 0
          ? 'No deployments yet: berth deploy makes the first, and every file written is recorded here.'
          : 'Only single-file writes so far: untick “Deployments only” to see them.',
      ),
      hidden > 0
        ? h('p', { class: 'hint' }, `${hidden} single-file ${hidden === 1 ? 'write' : 'writes'} hidden.`)
        : null,
    );
    fill(
      moreEl,
      nextOffset !== null ? actionButton('Load more', loadMore, { status, ariaLabel: 'Load older deployments' }) : null,
    );
  };

  /** Older entries, a page at a time until one more is shown (or a few pages brought only hidden ones). */
  const loadMore = async () => {
    const want = visible().length + 1;
    for (let i = 0; nextOffset !== null && i < MAX_PAGES_PER_LOAD; i++) {
      const page: { deployments: Deployment[]; pagination: Pagination } = await get(base, {
        limit: PAGE,
        offset: nextOffset,
      });
      // A deployment made meanwhile shifts the pages: an entry seen already is not shown twice.
      const seen = new Set(loaded.map((d) => d.id));
      loaded.push(...page.deployments.filter((d) => !seen.has(d.id)));
      nextOffset = page.pagination.nextOffset;
      if (visible().length >= want) break;
    }
    draw();
  };

  const reload = async () => {
    loaded = [];
    nextOffset = 0;
    await loadMore();
  };

  only.addEventListener('change', () => {
    draw();
    if (only.checked && visible().length === 0 && nextOffset !== null) void run(null, loadMore, status);
  });

  fill(
    body,
    h(
      'section',
      { class: 'card' },
      h(
        'div',
        { class: 'section-head' },
        h('h2', null, 'Deployments'),
        h(
          'label',
          { class: 'check inline-check', for: 'deployments-only' },
          only,
          ' Deployments only (hide single-file writes)',
        ),
      ),
      h(
        'p',
        { class: 'hint' },
        'Every change to the site’s files, newest first. A rollback or a restore makes the site what it was, as a new entry.',
      ),
      listEl,
      moreEl,
      status.el,
    ),
    restoreCard(site.id, reload, hasDatabase),
  );
  await loadMore();
}
