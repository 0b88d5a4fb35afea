// API keys of the account (ADMINs): create READ or WRITE (the key is shown once, with a copy button),
// list, revoke.
import { api, get, isAdmin } from './api.ts';
import { actionButton, badge, copyField, field, fill, form, h, statusLine, table, time } from './dom.ts';
import type { ApiKey, NewApiKey } from './types.ts';

export async function render(root: HTMLElement): Promise<void> {
  if (!isAdmin()) {
    fill(root, h('h1', null, 'API keys'), h('p', null, 'Only admins of this account manage its API keys.'));
    return;
  }
  const status = statusLine();
  const listEl = h('div', { class: 'loading' }, 'Loading keys…');
  const shown = h('div');

  const load = async () => {
    const { keys } = await get<{ keys: ApiKey[] }>('/v0/keys');
    fill(
      listEl,
      table<ApiKey>(
        'API keys',
        [
          { label: 'Name', cell: (k) => k.name ?? '(unnamed)' },
          { label: 'Permission', cell: (k) => badge(k.permission) },
          { label: 'Created', cell: (k) => time(k.createdAt) },
          { label: 'State', cell: (k) => (k.revokedAt ? [badge('REVOKED'), ' ', time(k.revokedAt)] : badge('ACTIVE')) },
          {
            label: 'Actions',
            class: 'actions-cell',
            cell: (k) =>
              k.revokedAt
                ? ''
                : actionButton(
                    'Revoke',
                    async () => {
                      if (
                        !window.confirm(`Revoke the key "${k.name ?? k.id}"? Anything using it stops working at once.`)
                      )
                        return;
                      await api('DELETE', `/v0/keys/${encodeURIComponent(k.id)}`);
                      status.note(`Revoked "${k.name ?? k.id}".`);
                      await load();
                    },
                    { status, class: 'danger', ariaLabel: `Revoke ${k.name ?? k.id}` },
                  ),
          },
        ],
        keys,
        'No API keys yet.',
      ),
    );
  };

  const createStatus = statusLine();
  const create = form(
    { class: 'stack', 'aria-label': 'Create an API key' },
    async (el) => {
      const data = new FormData(el);
      const created = await api<NewApiKey>('POST', '/v0/keys', {
        name: String(data.get('name') ?? '').trim(),
        permission: String(data.get('permission') ?? 'READ'),
      });
      el.reset();
      fill(
        shown,
        h(
          'div',
          { class: 'once' },
          h(
            'p',
            null,
            h('strong', null, `Key "${created.key.name}" (${created.key.permission})`),
            ': copy it now. It is shown this once only; Berth keeps only a digest.',
          ),
          copyField('New API key', created.secret),
        ),
      );
      await load();
    },
    createStatus,
    field(
      'Key name',
      () => h('input', { name: 'name', required: true, maxlength: 100, autocomplete: 'off' }),
      'Say where it is used, e.g. “CI deploys”.',
    ),
    field('Permission', () =>
      h(
        'select',
        { name: 'permission' },
        h('option', { value: 'READ' }, 'READ: list and read only'),
        h('option', { value: 'WRITE' }, 'WRITE: everything a key may do'),
      ),
    ),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create key')),
    createStatus.el,
  );

  fill(
    root,
    h('h1', null, 'API keys'),
    h('section', { class: 'card' }, h('h2', null, 'Create a key'), create, shown),
    h('section', { class: 'card' }, h('h2', null, 'Keys'), listEl, status.el),
  );
  await load();
}
