// Sites: the account's list, creating one, and a site's settings (name, access, archive, reconcile).
import { api, currentAccountId, get, getAll } from './api.ts';
import { type Child, badge, field, fill, form, h, run, statusLine, table, time } from './dom.ts';
import { type Route, go, href } from './router.ts';
import { trafficSection } from './analytics.ts';
import { sparkline } from './sparkline.ts';
import type { AccountAnalytics, AnalyticsCounts, AnalyticsPoint, Site, SiteDetail } from './types.ts';

export async function renderList(root: HTMLElement): Promise<void> {
  const status = statusLine();
  const list = h('div', { class: 'loading' }, 'Loading sites…');
  fill(
    root,
    h('h1', null, 'Sites'),
    list,
    h('section', { class: 'card' }, h('h2', null, 'Create a site'), createForm()),
    status.el,
  );
  // Each site's last 24 hours beside it; the list shows without them if they cannot be read.
  const [sites, traffic] = await Promise.all([
    getAll<Site, 'sites'>('/v0/sites', 'sites', { accountId: currentAccountId() }),
    get<AccountAnalytics>(`/v0/accounts/${encodeURIComponent(currentAccountId())}/analytics`, { step: 'hour' }).catch(
      () => null,
    ),
  ]);
  const trafficOf = new Map(traffic?.sites.map((s) => [s.site.id, s]) ?? []);
  const counted = (s: Site, value: (totals: AnalyticsCounts) => number) => {
    const found = trafficOf.get(s.id);
    return found ? value(found.totals).toLocaleString() : '–';
  };
  fill(
    list,
    table(
      'Sites',
      [
        { label: 'Name', cell: (s) => h('a', { href: href('sites', s.id) }, s.name) },
        {
          label: 'Address',
          cell: (s) =>
            h('a', { href: s.url, target: '_blank', rel: 'noopener noreferrer', class: 'mono' }, hostOf(s.url)),
        },
        { label: 'Access', cell: (s) => badge(s.access) },
        { label: 'Status', cell: (s) => badge(s.status) },
        { label: 'Requests, 24 h', cell: (s) => counted(s, (t) => t.requests), class: 'num' },
        { label: 'Errors (5xx)', cell: (s) => counted(s, (t) => t.status['5xx']), class: 'num' },
        {
          label: 'By the hour',
          cell: (s) => {
            const series: AnalyticsPoint[] | undefined = trafficOf.get(s.id)?.series;
            return series
              ? sparkline(
                  series.map((p) => p.requests),
                  `${s.name}, requests by the hour`,
                )
              : '–';
          },
        },
        { label: 'Updated', cell: (s) => time(s.updatedAt) },
      ],
      sites,
      'No sites yet: create the first one below.',
    ),
  );
}

const hostOf = (url: string): string => {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
};

function createForm(): HTMLElement {
  const status = statusLine();
  return form(
    { class: 'stack', 'aria-label': 'Create a site' },
    async (el) => {
      const data = new FormData(el);
      const subdomain = String(data.get('subdomain') ?? '').trim();
      const site = await api<Site>('POST', '/v0/sites', {
        accountId: currentAccountId(),
        name: String(data.get('name') ?? ''),
        access: String(data.get('access') ?? 'PUBLIC'),
        ...(subdomain ? { subdomain } : {}),
      });
      go(href('sites', site.id));
    },
    status,
    field('Site name', () => h('input', { name: 'name', required: true, maxlength: 100, autocomplete: 'off' })),
    field(
      'Subdomain',
      () =>
        h('input', {
          name: 'subdomain',
          pattern: '[a-z0-9]([a-z0-9\\-]*[a-z0-9])?',
          minlength: 3,
          maxlength: 63,
          autocomplete: 'off',
          spellcheck: 'false',
        }),
      'Optional: lowercase letters, digits and hyphens. Left empty, one is made up.',
    ),
    field('Access', () =>
      h(
        'select',
        { name: 'access' },
        h('option', { value: 'PUBLIC' }, 'Public: anyone with the address'),
        h('option', { value: 'PRIVATE' }, 'Private: signed-in members only'),
      ),
    ),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create site')),
    status.el,
  );
}

/** The tabs every page of a site shares. */
const TABS: Array<[string, string]> = [
  ['', 'Overview'],
  ['deployments', 'Deployments'],
  ['files', 'Files'],
  ['functions', 'Functions'],
  ['logs', 'Logs'],
  ['secrets', 'Secrets'],
  ['database', 'Database'],
  ['domains', 'Domains'],
];

/**
 * Loads the site named by the route and renders its heading and tabs into `root`; answers the site and
 * the element the page goes in.
 */
export async function siteFrame(root: HTMLElement, route: Route): Promise<{ site: SiteDetail; body: HTMLElement }> {
  const siteId = route.segments[1]!;
  const active = route.segments[2] ?? '';
  const site = await get<SiteDetail>(`/v0/sites/${encodeURIComponent(siteId)}`);
  const body = h('div', { class: 'site-body' });
  fill(
    root,
    h('p', { class: 'crumbs' }, h('a', { href: href('sites') }, 'Sites'), ' / '),
    h(
      'div',
      { class: 'site-head' },
      h('h1', null, site.name),
      h(
        'div',
        { class: 'site-meta' },
        badge(site.access),
        ' ',
        badge(site.status),
        ' ',
        h(
          'a',
          { href: site.url, target: '_blank', rel: 'noopener noreferrer', class: 'mono' },
          'Open site ',
          h('span', { class: 'hint' }, hostOf(site.url)),
        ),
      ),
    ),
    h(
      'nav',
      { class: 'tabs', 'aria-label': 'Site' },
      TABS.map(([key, label]) =>
        h(
          'a',
          {
            href: key ? href('sites', site.id, key) : href('sites', site.id),
            class: key === active ? 'active' : null,
            'aria-current': key === active ? 'page' : null,
          },
          label,
        ),
      ),
    ),
    body,
  );
  return { site, body };
}

export async function renderSite(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const status = statusLine();
  const update = async (changes: Record<string, unknown>, done: string) => {
    await api<SiteDetail>('POST', `/v0/sites/${encodeURIComponent(site.id)}`, changes);
    await renderSite(root, route);
    const again = root.querySelector('.site-status');
    if (again) again.textContent = done;
  };
  const button = (label: string, changes: Record<string, unknown>, done: string, kind?: string) => {
    const el = h('button', { type: 'button', class: kind ?? null }, label);
    el.addEventListener('click', () => run(el, () => update(changes, done), status));
    return el;
  };

  const rename = form(
    { class: 'row-form', 'aria-label': 'Rename the site' },
    async (el) => update({ name: String(new FormData(el).get('name') ?? '') }, 'Renamed.'),
    status,
    field('Name', () => h('input', { name: 'name', required: true, maxlength: 100, value: site.name })),
    h('button', { type: 'submit' }, 'Rename'),
  );

  const runtime = site.runtime;
  const failed = runtime.functions?.failed ?? [];
  fill(
    body,
    trafficSection(site.id),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Settings'),
      rename,
      h(
        'div',
        { class: 'setting' },
        h(
          'p',
          null,
          site.access === 'PUBLIC'
            ? 'Public: anyone with the address can read the site’s web files.'
            : 'Private: only signed-in members of this account can read the site’s web files.',
        ),
        site.access === 'PUBLIC'
          ? button('Make private', { access: 'PRIVATE' }, 'The site is private now.')
          : button('Make public', { access: 'PUBLIC' }, 'The site is public now.'),
      ),
      h(
        'div',
        { class: 'setting' },
        h(
          'p',
          null,
          site.status === 'ACTIVE'
            ? 'Active: the site is served.'
            : 'Archived: the site is not served and its functions do not run; its files are kept.',
        ),
        site.status === 'ACTIVE'
          ? button('Archive', { status: 'ARCHIVED' }, 'The site is archived.', 'danger')
          : button('Re-activate', { status: 'ACTIVE' }, 'The site is active again.'),
      ),
      h('p', { class: 'status note site-status', 'aria-live': 'polite' }),
      status.el,
    ),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Runtime'),
      h(
        'dl',
        { class: 'facts' },
        fact('Status', badge(runtime.status.replace('_', ' '), runtime.status.toLowerCase())),
        fact('Functions ready', runtime.functions ? `${runtime.functions.ready} of ${runtime.functions.total}` : '–'),
        fact('Last reconciled', time(runtime.lastReconciledAt)),
        fact('Subdomain', h('span', { class: 'mono' }, site.subdomain)),
        fact('Bucket', h('span', { class: 'mono' }, site.bucketId)),
        fact('Site id', h('span', { class: 'mono' }, site.id)),
      ),
      failed.length > 0
        ? h(
            'ul',
            { class: 'problems' },
            failed.map((f) =>
              h(
                'li',
                null,
                h('span', { class: 'mono' }, `${f.path}:${f.error.line}:${f.error.column}`),
                ' ',
                f.error.message,
              ),
            ),
          )
        : null,
      site.status === 'ACTIVE'
        ? button(
            'Reconcile',
            { reconcile: true },
            'Reconciled: every function was deployed again from its stored source.',
          )
        : null,
    ),
  );
}

export const fact = (label: string, value: Child): HTMLElement[] => [h('dt', null, label), h('dd', null, value)];
