// Approving a `berth login` from the terminal: the code shown there and here must match; the user
// picks the account and READ or WRITE, and the CLI receives a new key named after its machine.
import { ApiError, api, currentAccountId, currentSession } from './api.ts';
import { fill, form, h, statusLine, time, uid } from './dom.ts';
import type { Route } from './router.ts';
import type { CliLogin } from './types.ts';

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const code = (route.segments[1] ?? '').toUpperCase();
  const path = `/v0/cli-logins/${encodeURIComponent(code)}`;
  let login: CliLogin;
  try {
    ({ login } = await api<{ login: CliLogin }>('GET', path));
  } catch (err) {
    if (err instanceof ApiError && (err.status === 404 || err.status === 410)) {
      fill(
        root,
        h('h1', null, 'Approve a CLI sign-in'),
        h(
          'p',
          { class: 'status error', role: 'alert' },
          'There is no pending sign-in with this code: it has expired (after 10 minutes), was approved already, or the code is wrong. Run berth login again.',
        ),
      );
      return;
    }
    throw err;
  }

  const status = statusLine();
  const memberships = currentSession().user.memberships;
  const accountId = uid();
  const pending = login.status === 'PENDING';
  const approve = form(
    { class: 'stack', 'aria-label': 'Approve the CLI sign-in' },
    async (el) => {
      const data = new FormData(el);
      const account = String(data.get('account') ?? currentAccountId());
      const permission = String(data.get('permission') ?? 'READ');
      const approved = await api<{ login: CliLogin }>('POST', `${path}/approve`, { permission }, { account });
      const accountName = memberships.find((m) => m.accountId === account)?.accountName ?? account;
      fill(
        root,
        h('h1', null, 'CLI sign-in approved'),
        h(
          'p',
          { class: 'status note', role: 'status' },
          `The terminal on ${approved.login.machine} receives a ${permission} key for ${accountName}. You can close this page and go back to your terminal.`,
        ),
      );
    },
    status,
    h(
      'div',
      { class: 'field' },
      h('label', { for: accountId }, 'Account for the key'),
      h(
        'select',
        { id: accountId, name: 'account' },
        memberships.map((m) =>
          h('option', { value: m.accountId, selected: m.accountId === currentAccountId() }, m.accountName),
        ),
      ),
    ),
    h(
      'fieldset',
      { class: 'choices' },
      h('legend', null, 'Permission'),
      h(
        'label',
        null,
        h('input', { type: 'radio', name: 'permission', value: 'READ', checked: true }),
        ' READ: list and read only',
      ),
      h(
        'label',
        null,
        h('input', { type: 'radio', name: 'permission', value: 'WRITE' }),
        ' WRITE: deploy and change things',
      ),
    ),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Approve')),
    status.el,
  );

  fill(
    root,
    h('h1', null, 'Approve a CLI sign-in'),
    h(
      'section',
      { class: 'card' },
      h('p', null, 'Check that this code matches the one in your terminal:'),
      h('p', { class: 'code-display mono', 'aria-label': 'Sign-in code' }, login.code),
      h(
        'dl',
        { class: 'facts' },
        h('dt', null, 'Machine'),
        h('dd', null, login.machine),
        h('dt', null, 'Expires'),
        h('dd', null, time(login.expiresAt)),
        h('dt', null, 'Status'),
        h('dd', null, login.status),
      ),
      pending
        ? approve
        : h('p', { class: 'status error', role: 'alert' }, 'This sign-in is no longer waiting for approval.'),
      pending
        ? h(
            'p',
            { class: 'hint' },
            'If the codes differ, or you did not run berth login just now, close this page: someone else may be trying to get a key.',
          )
        : null,
    ),
  );
}
