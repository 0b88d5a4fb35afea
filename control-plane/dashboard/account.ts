// The signed-in user's own settings: changing the password.
import { api, currentSession } from './api.ts';
import { field, fill, form, h, statusLine } from './dom.ts';

export async function render(root: HTMLElement): Promise<void> {
  const status = statusLine();
  const change = form(
    { class: 'stack', 'aria-label': 'Change your password' },
    async (el) => {
      const data = new FormData(el);
      const newPassword = String(data.get('newPassword') ?? '');
      if (newPassword !== String(data.get('confirmPassword') ?? ''))
        throw new Error('the new password and its confirmation differ');
      await api('POST', '/v0/me/password', { currentPassword: String(data.get('currentPassword') ?? ''), newPassword });
      el.reset();
      status.note('Password changed. Your other sessions have ended.');
    },
    status,
    h('input', {
      type: 'text',
      name: 'username',
      autocomplete: 'username',
      value: currentSession().user.email,
      hidden: true,
      readonly: true,
    }),
    field('Current password', () =>
      h('input', { name: 'currentPassword', type: 'password', required: true, autocomplete: 'current-password' }),
    ),
    field(
      'New password',
      () =>
        h('input', {
          name: 'newPassword',
          type: 'password',
          required: true,
          minlength: 10,
          maxlength: 1024,
          autocomplete: 'new-password',
        }),
      '10 to 1,024 characters.',
    ),
    field('Confirm new password', () =>
      h('input', {
        name: 'confirmPassword',
        type: 'password',
        required: true,
        minlength: 10,
        maxlength: 1024,
        autocomplete: 'new-password',
      }),
    ),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Change password')),
    status.el,
  );
  fill(
    root,
    h('h1', null, 'Password'),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Change your password'),
      h('p', { class: 'hint' }, `Signed in as ${currentSession().user.email}.`),
      change,
    ),
  );
}
