// A site's custom domains: each with its state, the DNS records to create while its TXT record is not
// seen (a new name, or one whose record went away), verifying (a failure says what DNS has instead),
// the canonical name, adding and removing. A certificate column appears once the server reports a
// certificate for its domains.
import { api, getAll } from './api.ts';
import {
  type Child,
  type Column,
  actionButton,
  badge,
  copyValue,
  field,
  fill,
  form,
  h,
  statusLine,
  table,
  time,
} from './dom.ts';
import type { Route } from './router.ts';
import { siteFrame } from './sites.ts';
import type { Domain } from './types.ts';

interface DnsRecord {
  type: 'TXT' | 'CNAME';
  name: string;
  value: string;
}

/** A name whose TXT record was never seen, or has gone missing since, shows the records to create. */
const needsRecords = (d: Domain): boolean => d.status === 'PENDING' || d.failingSince !== null;

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const base = `/v0/sites/${encodeURIComponent(site.id)}/domains`;
  const domainPath = (hostname: string) => `${base}/${encodeURIComponent(hostname)}`;
  const status = statusLine();
  const listEl = h('div', { class: 'loading' }, 'Loading domains…');
  const recordsEl = h('div');
  const canonicalEl = h('div');

  /** The site at one of its domains: the scheme and port it is served with at its own host. */
  const addressAt = (hostname: string): string => {
    const url = new URL(site.url);
    url.hostname = hostname;
    url.pathname = '/';
    return url.href;
  };

  const stateCell = (d: Domain): Child => [
    badge(d.status),
    d.failingSince
      ? h(
          'div',
          { class: 'problem small' },
          'Record missing since ',
          time(d.failingSince),
          d.status === 'ACTIVE' ? ': still served until the grace period ends' : ': no longer served',
        )
      : h(
          'div',
          { class: 'hint' },
          d.status === 'ACTIVE' ? ['Verified ', time(d.verifiedAt)] : 'Waiting for its DNS records',
        ),
  ];

  /** The certificate in words: a badge says which state, the line below when and why. */
  const certificateCell = (d: Domain) => {
    const c = d.certificate;
    if (!c) return '–';
    if (c.status === 'ISSUED')
      return [badge('Issued', 'active'), h('div', { class: 'hint' }, ['Renews ', time(c.renewAt!)])];
    if (c.status === 'FAILING')
      return [
        badge('Failing', 'failed'),
        h('div', { class: 'hint' }, [c.error ?? 'the CA refused it', '. Tried again ', time(c.retryAt!)]),
        c.notAfter ? h('div', { class: 'hint' }, ['The current one serves until ', time(c.notAfter)]) : null,
      ];
    return h(
      'span',
      { class: 'hint' },
      d.status === 'ACTIVE' ? 'Ordered at the first HTTPS visit' : 'Once the domain is verified',
    );
  };

  const load = async () => {
    const domains = await getAll<Domain, 'domains'>(base, 'domains');
    const columns: Column<Domain>[] = [
      {
        label: 'Domain',
        cell: (d) =>
          d.status === 'ACTIVE'
            ? h(
                'a',
                { href: addressAt(d.hostname), target: '_blank', rel: 'noopener noreferrer', class: 'mono' },
                d.hostname,
              )
            : h('span', { class: 'mono' }, d.hostname),
      },
      { label: 'Status', cell: stateCell },
      {
        label: 'Canonical',
        cell: (d) =>
          d.canonical
            ? [
                h('strong', null, 'Yes'),
                d.redirectSubdomain ? h('div', { class: 'hint' }, `${d.target} redirects here too`) : null,
              ]
            : h('span', { class: 'hint' }, 'No'),
      },
    ];
    // The certificate's state is the server's to report: no column until its domains carry one.
    if (domains.some((d) => d.certificate !== undefined)) {
      columns.push({
        label: 'Certificate',
        class: 'cert-cell',
        cell: certificateCell,
      });
    }
    columns.push({
      label: 'Actions',
      class: 'actions-cell',
      cell: (d) =>
        actionButton(
          'Remove',
          async () => {
            const also = d.canonical ? ', and its other names stop redirecting to it' : '';
            if (!window.confirm(`Remove ${d.hostname}? The site stops answering at it at once${also}.`)) return;
            await api('DELETE', domainPath(d.hostname));
            await load();
            status.note(`Removed ${d.hostname}.`);
          },
          { status, class: 'danger', ariaLabel: `Remove ${d.hostname}` },
        ),
    });
    fill(
      listEl,
      table<Domain>(
        'Custom domains',
        columns,
        domains,
        'No custom domains yet: the site answers at its own address only.',
      ),
    );
    fill(recordsEl, domains.filter(needsRecords).map(recordsCard));
    fill(canonicalEl, canonicalCard(domains));
  };

  /** The records to create for one name, each part copyable, and its Verify button. */
  const recordsCard = (d: Domain): HTMLElement => {
    const verifyStatus = statusLine();
    const records: DnsRecord[] = [
      { type: 'TXT', name: d.verification.name, value: d.verification.value },
      { type: 'CNAME', name: d.hostname, value: d.target },
    ];
    return h(
      'section',
      { class: 'card', 'aria-label': `DNS records of ${d.hostname}` },
      h('h2', null, 'DNS records of ', h('span', { class: 'mono' }, d.hostname)),
      h(
        'p',
        null,
        d.status === 'PENDING'
          ? 'Create these records at the DNS provider of the name, then verify it. '
          : 'The TXT record was not found at the last check: put it back, then verify again. ',
        'The TXT record proves the name is yours: keep it, Berth looks for it again from time to time.',
      ),
      table<DnsRecord>(
        `DNS records for ${d.hostname}`,
        [
          { label: 'Type', cell: (r) => h('span', { class: 'mono' }, r.type) },
          { label: 'Name', cell: (r) => copyValue(r.name, `Copy the ${r.type} name for ${d.hostname}`) },
          { label: 'Value', cell: (r) => copyValue(r.value, `Copy the ${r.type} value for ${d.hostname}`) },
        ],
        records,
      ),
      h(
        'p',
        { class: 'hint' },
        'For an apex name (example.com), which cannot have a CNAME, create the same A and AAAA records as ',
        h('span', { class: 'mono' }, d.target),
        ' instead. DNS changes may take a few minutes to be seen.',
      ),
      h(
        'div',
        { class: 'actions' },
        actionButton(
          'Verify',
          async () => {
            const { domain } = await api<{ domain: Domain }>('POST', `${domainPath(d.hostname)}/verify`);
            await load();
            status.note(`${domain.hostname} is ACTIVE: the site answers at it.`);
          },
          { status: verifyStatus, class: 'primary', ariaLabel: `Verify ${d.hostname}` },
        ),
      ),
      verifyStatus.el,
    );
  };

  /** Which name the site's other names redirect to; only an ACTIVE one can be chosen. */
  const canonicalCard = (domains: Domain[]): HTMLElement | null => {
    if (domains.length === 0) return null;
    const target = domains[0]!.target;
    const current = domains.find((d) => d.canonical);
    const active = domains.filter((d) => d.status === 'ACTIVE');
    const formStatus = statusLine();
    const setCanonical = async (hostname: string, settings: { canonical: boolean; redirectSubdomain?: boolean }) => {
      await api<{ domain: Domain }>('POST', domainPath(hostname), settings);
      await load();
      status.note(settings.canonical ? `${hostname} is the canonical name now.` : 'No name redirects now.');
    };
    return h(
      'section',
      { class: 'card' },
      h('h2', null, 'Canonical name'),
      h(
        'p',
        null,
        current
          ? [
              h('span', { class: 'mono' }, current.hostname),
              ' is canonical: the site’s other domains answer with a permanent redirect to it',
              current.redirectSubdomain ? [', and so does ', h('span', { class: 'mono' }, target)] : null,
              '.',
            ]
          : 'No canonical name: each of the site’s names serves it as it is.',
      ),
      active.length === 0
        ? h('p', { class: 'hint' }, 'Once a domain is ACTIVE it can be made the canonical name.')
        : form(
            { class: 'row-form canonical-form', 'aria-label': 'Make a domain canonical' },
            async (el) => {
              const data = new FormData(el);
              await setCanonical(String(data.get('hostname') ?? ''), {
                canonical: true,
                redirectSubdomain: data.get('redirectSubdomain') === 'on',
              });
            },
            formStatus,
            field('Canonical domain', () =>
              h(
                'select',
                { name: 'hostname' },
                active.map((d) => h('option', { value: d.hostname, selected: d.canonical }, d.hostname)),
              ),
            ),
            h(
              'label',
              { class: 'check' },
              h('input', { type: 'checkbox', name: 'redirectSubdomain', checked: current?.redirectSubdomain }),
              ' Redirect ',
              h('span', { class: 'mono' }, target),
              ' too',
            ),
            h(
              'div',
              { class: 'actions' },
              h('button', { type: 'submit' }, 'Make canonical'),
              current
                ? actionButton('Stop redirecting', () => setCanonical(current.hostname, { canonical: false }), {
                    status: formStatus,
                  })
                : null,
            ),
          ),
      formStatus.el,
    );
  };

  const addStatus = statusLine();
  const addForm = form(
    { class: 'row-form', 'aria-label': 'Add a domain' },
    async (el) => {
      const hostname = String(new FormData(el).get('hostname') ?? '').trim();
      const { domain } = await api<{ domain: Domain }>('POST', base, { hostname });
      el.reset();
      await load();
      addStatus.note(`Added ${domain.hostname}: create its DNS records below, then verify it.`);
    },
    addStatus,
    field(
      'Domain name',
      () =>
        h('input', {
          name: 'hostname',
          required: true,
          maxlength: 253,
          autocomplete: 'off',
          autocapitalize: 'none',
          spellcheck: 'false',
          inputmode: 'url',
          placeholder: 'www.example.com',
          class: 'mono',
        }),
      'A name whose DNS you control, such as www.example.com or example.com.',
    ),
    h('button', { type: 'submit', class: 'primary' }, 'Add domain'),
  );

  fill(
    body,
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Domains'),
      h(
        'p',
        { class: 'hint' },
        'Names of your own the site answers at, once DNS shows they are yours. It keeps its address at ',
        h('span', { class: 'mono' }, new URL(site.url).host),
        ' too.',
      ),
      listEl,
      status.el,
    ),
    h('section', { class: 'card' }, h('h2', null, 'Add a domain'), addForm, addStatus.el),
    recordsEl,
    canonicalEl,
  );
  await load();
}
