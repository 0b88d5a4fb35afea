// Members of the account and invitations (ADMINs): change a role, remove a member, invite by email
// (the link is shown with a copy button), cancel an invitation.
import { api, currentSession, get, isAdmin } from './api.ts';
import { actionButton, badge, copyField, field, fill, form, h, run, statusLine, table, time } from './dom.ts';
import type { Invitation, Member, NewInvitation } from './types.ts';

const roleOptions = (selected: string) => [
  h('option', { value: 'MEMBER', selected: selected === 'MEMBER' }, 'Member'),
  h('option', { value: 'ADMIN', selected: selected === 'ADMIN' }, 'Admin'),
];

export async function render(root: HTMLElement): Promise<void> {
  if (!isAdmin()) {
    fill(root, h('h1', null, 'Members'), h('p', null, 'Only admins of this account manage its members.'));
    return;
  }
  const status = statusLine();
  const membersEl = h('div', { class: 'loading' }, 'Loading members…');
  const invitationsEl = h('div', { class: 'loading' }, 'Loading invitations…');
  const invited = h('div');
  const me = currentSession().user.id;

  const loadMembers = async () => {
    const { members } = await get<{ members: Member[] }>('/v0/members');
    fill(
      membersEl,
      table<Member>(
        'Members',
        [
          { label: 'Email', cell: (m) => [m.email, m.userId === me ? ' (you)' : ''] },
          {
            label: 'Role',
            cell: (m) => {
              const select = h('select', { 'aria-label': `Role of ${m.email}` }, roleOptions(m.role));
              select.addEventListener('change', () =>
                run(
                  null,
                  async () => {
                    try {
                      await api('POST', `/v0/members/${encodeURIComponent(m.userId)}`, { role: select.value });
                      status.note(`${m.email} is ${select.value === 'ADMIN' ? 'an admin' : 'a member'} now.`);
                    } finally {
                      await loadMembers();
                    }
                  },
                  status,
                ),
              );
              return select;
            },
          },
          { label: 'Joined', cell: (m) => time(m.joinedAt) },
          {
            label: 'Actions',
            class: 'actions-cell',
            cell: (m) =>
              actionButton(
                'Remove',
                async () => {
                  if (!window.confirm(`Remove ${m.email} from this account?`)) return;
                  await api('DELETE', `/v0/members/${encodeURIComponent(m.userId)}`);
                  status.note(`Removed ${m.email}.`);
                  await loadMembers();
                },
                { status, class: 'danger', ariaLabel: `Remove ${m.email}` },
              ),
          },
        ],
        members,
      ),
    );
  };

  const loadInvitations = async () => {
    const { invitations } = await get<{ invitations: Invitation[] }>('/v0/invitations');
    fill(
      invitationsEl,
      table<Invitation>(
        'Open invitations',
        [
          { label: 'Email', cell: (i) => i.email },
          { label: 'Role', cell: (i) => badge(i.role) },
          { label: 'Expires', cell: (i) => time(i.expiresAt) },
          {
            label: 'Actions',
            class: 'actions-cell',
            cell: (i) =>
              actionButton(
                'Cancel',
                async () => {
                  await api('DELETE', `/v0/invitations/${encodeURIComponent(i.id)}`);
                  status.note(`Cancelled the invitation of ${i.email}.`);
                  await loadInvitations();
                },
                { status, class: 'danger', ariaLabel: `Cancel the invitation of ${i.email}` },
              ),
          },
        ],
        invitations,
        'No open invitations.',
      ),
    );
  };

  const inviteStatus = statusLine();
  const invite = form(
    { class: 'stack', 'aria-label': 'Invite someone' },
    async (el) => {
      const data = new FormData(el);
      const created = await api<NewInvitation>('POST', '/v0/invitations', {
        email: String(data.get('email') ?? '').trim(),
        role: String(data.get('role') ?? 'MEMBER'),
      });
      el.reset();
      fill(
        invited,
        h(
          'p',
          null,
          `Send this link to ${created.invitation.email}; it works once, until `,
          time(created.invitation.expiresAt),
          '.',
        ),
        copyField('Invitation link', created.url),
      );
      await loadInvitations();
    },
    inviteStatus,
    field('Email', () => h('input', { name: 'email', type: 'email', required: true, autocomplete: 'off' })),
    field('Role', () => h('select', { name: 'role' }, roleOptions('MEMBER'))),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create invitation')),
    inviteStatus.el,
  );

  fill(
    root,
    h('h1', null, 'Members'),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Members'),
      h(
        'p',
        { class: 'hint' },
        'Admins may do everything; members everything but keys, members, exports and deleting databases.',
      ),
      membersEl,
      status.el,
    ),
    h('section', { class: 'card' }, h('h2', null, 'Invite someone'), invite, invited),
    h('section', { class: 'card' }, h('h2', null, 'Open invitations'), invitationsEl),
  );
  await Promise.all([loadMembers(), loadInvitations()]);
}
