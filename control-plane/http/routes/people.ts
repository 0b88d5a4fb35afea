// Routes for signed-in users of the dashboard (keys, members, invitations, CLI login approval, one's own
// password) and the account's usage. API keys are refused the user-only ones with 403 `forbidden`.
import * as people from '../../operations/people.ts';
import { RestNewInvitation } from '../../schemas.ts';
import type { OperationRoute } from '../route.ts';

const USERS = 'People (signed-in users)';

/** An invitation's link where people reach Berth. */
const withInvitationUrl = (output: { path: string }, origin: string) => ({ ...output, url: `${origin}${output.path}` });

export const peopleRoutes: OperationRoute[] = [
  {
    operation: people.getUsage,
    method: 'GET',
    path: '/v0/accounts/current/usage',
    operationId: 'getUsage',
    tag: 'Accounts',
    ok: 'model calls today against the allowance, stored bytes against the storage limit',
  },
  {
    operation: people.listApiKeys,
    method: 'GET',
    path: '/v0/keys',
    operationId: 'listApiKeys',
    tag: USERS,
    ok: 'the account’s API keys',
  },
  {
    operation: people.createApiKey,
    method: 'POST',
    path: '/v0/keys',
    operationId: 'createApiKey',
    tag: USERS,
    status: 201,
    ok: 'the key, with its secret this once',
  },
  {
    operation: people.revokeApiKey,
    method: 'DELETE',
    path: '/v0/keys/:keyId',
    operationId: 'revokeApiKey',
    tag: USERS,
    ok: 'the revoked key',
  },
  {
    operation: people.listMembers,
    method: 'GET',
    path: '/v0/members',
    operationId: 'listMembers',
    tag: USERS,
    ok: 'the account’s members',
  },
  {
    operation: people.updateMember,
    method: 'POST',
    path: '/v0/members/:userId',
    operationId: 'updateMember',
    tag: USERS,
    ok: 'the member with the new role',
  },
  {
    operation: people.removeMember,
    method: 'DELETE',
    path: '/v0/members/:userId',
    operationId: 'removeMember',
    tag: USERS,
    ok: 'removed',
  },
  {
    operation: people.listInvitations,
    method: 'GET',
    path: '/v0/invitations',
    operationId: 'listInvitations',
    tag: USERS,
    ok: 'open invitations',
  },
  {
    operation: people.createInvitation,
    method: 'POST',
    path: '/v0/invitations',
    operationId: 'createInvitation',
    tag: USERS,
    status: 201,
    ok: 'the invitation and its single-use link, shown this once',
    present: withInvitationUrl,
    presents: RestNewInvitation,
  },
  {
    operation: people.revokeInvitation,
    method: 'DELETE',
    path: '/v0/invitations/:invitationId',
    operationId: 'revokeInvitation',
    tag: USERS,
    ok: 'revoked',
  },
  {
    operation: people.getCliLogin,
    method: 'GET',
    path: '/v0/cli-logins/:code',
    operationId: 'getCliLogin',
    tag: USERS,
    ok: 'the login request',
  },
  {
    operation: people.approveCliLogin,
    method: 'POST',
    path: '/v0/cli-logins/:code/approve',
    operationId: 'approveCliLogin',
    tag: USERS,
    ok: 'the approved login request',
  },
  {
    operation: people.changePassword,
    method: 'POST',
    path: '/v0/me/password',
    operationId: 'changePassword',
    tag: USERS,
    ok: 'changed',
  },
];
