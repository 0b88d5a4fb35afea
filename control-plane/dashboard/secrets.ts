// A site's secrets: set, delete, reveal (each reveal is written to the access log as DASHBOARD, with
// the user) and the access log itself.
import { api, get } from './api.ts';
import { actionButton, field, fill, form, h, statusLine, table, time } from './dom.ts';
import type { Route } from './router.ts';
import { siteFrame } from './sites.ts';
import type { SecretAccessLog, SecretMetadata, SecretValue } from './types.ts';

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const base = `/v0/sites/${encodeURIComponent(site.id)}`;
  const status = statusLine();
  const listEl = h('div', { class: 'loading' }, 'Loading secrets…');
  const logEl = h('div', { class: 'loading' }, 'Loading…');
  const secretPath = (name: string) => `${base}/secrets/${encodeURIComponent(name)}`;

  const loadLog = async () => {
    const { accessLogs } = await get<{ accessLogs: SecretAccessLog[] }>(`${base}/secret_access_logs`, { limit: 100 });
    fill(
      logEl,
      table<SecretAccessLog>(
        'Secret access log',
        [
          { label: 'When', cell: (e) => time(e.accessedAt) },
          { label: 'Secret', cell: (e) => h('span', { class: 'mono' }, e.secretName) },
          { label: 'Through', cell: (e) => e.via },
          { label: 'Who', cell: (e) => h('span', { class: 'mono small' }, e.userEmail ?? e.keyId) },
        ],
        accessLogs,
        'No secret has been read yet.',
      ),
    );
  };

  const loadList = async () => {
    const { secrets } = await get<{ secrets: SecretMetadata[] }>(`${base}/secrets`, { limit: 200 });
    fill(
      listEl,
      table<SecretMetadata>(
        'Secrets',
        [
          { label: 'Name', cell: (s) => h('span', { class: 'mono' }, s.name) },
          { label: 'Updated', cell: (s) => time(s.updatedAt) },
          {
            label: 'Value',
            class: 'value-cell',
            cell: (s) => {
              const value = h('span', { class: 'secret-value' });
              const reveal = actionButton(
                'Reveal',
                async () => {
                  if (value.childElementCount > 0) {
                    value.replaceChildren();
                    reveal.textContent = 'Reveal';
                    return;
                  }
                  const { secret } = await api<{ secret: SecretValue }>('GET', secretPath(s.name));
                  value.replaceChildren(h('code', { class: 'mono', 'aria-label': `Value of ${s.name}` }, secret.value));
                  reveal.textContent = 'Hide';
                  await loadLog();
                },
                { status, ariaLabel: `Reveal ${s.name}` },
              );
              return h('div', { class: 'reveal' }, reveal, value);
            },
          },
          {
            label: 'Actions',
            class: 'actions-cell',
            cell: (s) =>
              actionButton(
                'Delete',
                async () => {
                  if (!window.confirm(`Delete the secret ${s.name}? Functions reading it get null from then on.`))
                    return;
                  await api('DELETE', secretPath(s.name));
                  status.note(`Deleted ${s.name}.`);
                  await loadList();
                },
                { status, class: 'danger', ariaLabel: `Delete ${s.name}` },
              ),
          },
        ],
        secrets,
        'No secrets yet.',
      ),
    );
  };

  const setStatus = statusLine();
  const setForm = form(
    { class: 'stack', 'aria-label': 'Set a secret' },
    async (el) => {
      const data = new FormData(el);
      const name = String(data.get('name') ?? '').trim();
      await api('POST', `${base}/secrets`, { name, value: String(data.get('value') ?? '') });
      el.reset();
      setStatus.note(`Saved ${name}. Functions read it with ctx.secrets.get("${name}").`);
      await loadList();
    },
    setStatus,
    field(
      'Secret name',
      () =>
        h('input', {
          name: 'name',
          required: true,
          maxlength: 128,
          pattern: '[A-Za-z_][A-Za-z0-9_]*',
          autocomplete: 'off',
          spellcheck: 'false',
          class: 'mono',
        }),
      'Letters, digits and underscores, not starting with a digit. An existing name gets the new value.',
    ),
    field('Secret value', () =>
      h('textarea', {
        name: 'value',
        required: true,
        rows: 2,
        autocomplete: 'off',
        spellcheck: 'false',
        class: 'mono',
      }),
    ),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save secret')),
    setStatus.el,
  );

  fill(
    body,
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Secrets'),
      h('p', { class: 'hint' }, 'Values are encrypted at rest. Revealing one is recorded in the access log below.'),
      listEl,
      status.el,
    ),
    h('section', { class: 'card' }, h('h2', null, 'Set a secret'), setForm),
    h(
      'section',
      { class: 'card' },
      h(
        'div',
        { class: 'section-head' },
        h('h2', null, 'Access log'),
        actionButton('Refresh', loadLog, { status, ariaLabel: 'Refresh the access log' }),
      ),
      logEl,
    ),
  );
  await Promise.all([loadList(), loadLog()]);
}
