// The people side, for signed-in users only (the spec keeps keys, membership and approvals out of the
// API-key contract): API keys, members and invitations, a CLI login's approval, one's own password.
// The account's model-call usage is readable by any credential.
import { z } from 'zod';
import * as cliLogins from '../services/cli-logins.ts';
import * as keys from '../services/keys.ts';
import * as members from '../services/members.ts';
import { changePassword as changeOwnPassword } from '../services/sessions.ts';
import { modelCallsToday } from '../services/llm.ts';
import { databaseReplicaBytes } from '../services/storage-quota.ts';
import { branchBytes } from '../database-branches/branches.ts';
import {
  AccountUsage,
  ApiKey,
  CliLogin,
  Invitation,
  Member,
  Name,
  NewInvitation,
  Permission,
  Role,
  Uuid,
  NewApiKey,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

const apiKey = ({ accountId: _account, ...info }: keys.KeyInfo) => info;

export const listApiKeys = defineOperation({
  name: 'list_api_keys',
  description: 'The account’s API keys, revoked ones included (never their secrets)',
  permission: 'READ',
  audience: 'user-admins',
  input: z.object({}).strict(),
  output: z.object({ keys: z.array(ApiKey) }),
  run: async (deps, actor) => ({ keys: (await keys.listKeys(deps, actor.accountId)).map(apiKey) }),
});

export const createApiKey = defineOperation({
  name: 'create_api_key',
  description: 'Make an API key; its secret is in this answer only',
  permission: 'WRITE',
  audience: 'user-admins',
  input: z.object({ name: Name, permission: Permission }).strict(),
  output: NewApiKey,
  run: async (deps, actor, input) => {
    const made = await keys.createKey(deps, {
      accountId: actor.accountId,
      permission: input.permission,
      name: input.name,
      createdBy: actor.user!.id,
    });
    return { key: apiKey(await keys.getKey(deps, actor.accountId, made.id)), secret: made.key };
  },
});

export const revokeApiKey = defineOperation({
  name: 'revoke_api_key',
  description: 'Revoke an API key: it stops working at once',
  permission: 'WRITE',
  audience: 'user-admins',
  destructive: true,
  input: z.object({ keyId: Uuid }).strict(),
  output: z.object({ key: ApiKey }),
  run: async (deps, actor, input) => {
    await keys.getKey(deps, actor.accountId, input.keyId);
    return { key: apiKey(await keys.revokeKey(deps, input.keyId)) };
  },
});

export const listMembers = defineOperation({
  name: 'list_members',
  description: 'The account’s members and their roles',
  permission: 'READ',
  audience: 'users',
  input: z.object({}).strict(),
  output: z.object({ members: z.array(Member) }),
  run: (deps, actor) => members.listMembers(deps, actor),
});

export const updateMember = defineOperation({
  name: 'update_member',
  description: 'Change a member’s role (the account keeps at least one ADMIN)',
  permission: 'WRITE',
  audience: 'user-admins',
  input: withParams(z.object({ userId: Uuid }), z.object({ role: Role })),
  output: z.object({ member: Member }),
  run: (deps, actor, input) => members.updateMember(deps, actor, input.userId, input.role),
});

export const removeMember = defineOperation({
  name: 'remove_member',
  description: 'Remove a member from the account (the account keeps at least one ADMIN)',
  permission: 'WRITE',
  audience: 'user-admins',
  destructive: true,
  input: z.object({ userId: Uuid }).strict(),
  output: z.object({ removed: z.literal(true), userId: Uuid }),
  run: (deps, actor, input) => members.removeMember(deps, actor, input.userId),
});

export const listInvitations = defineOperation({
  name: 'list_invitations',
  description: 'Invitations not yet accepted, revoked or expired',
  permission: 'READ',
  audience: 'user-admins',
  input: z.object({}).strict(),
  output: z.object({ invitations: z.array(Invitation) }),
  run: (deps, actor) => members.listInvitations(deps, actor),
});

export const createInvitation = defineOperation({
  name: 'create_invitation',
  description: 'Invite an email into the account with a role: a single-use link, valid for 7 days',
  permission: 'WRITE',
  audience: 'user-admins',
  input: z.object({ email: z.string({ error: 'must be a string' }).max(254), role: Role }).strict(),
  output: NewInvitation,
  run: (deps, actor, input) => members.createInvitation(deps, actor, input),
});

export const revokeInvitation = defineOperation({
  name: 'revoke_invitation',
  description: 'Withdraw an invitation: its link stops working',
  permission: 'WRITE',
  audience: 'user-admins',
  destructive: true,
  input: z.object({ invitationId: Uuid }).strict(),
  output: z.object({ revoked: z.literal(true), invitationId: Uuid }),
  run: (deps, actor, input) => members.revokeInvitation(deps, actor, input.invitationId),
});

export const getCliLogin = defineOperation({
  name: 'get_cli_login',
  description: 'A CLI login request by the code the CLI shows, to check before approving it',
  permission: 'READ',
  audience: 'users',
  input: z.object({ code: z.string().max(20) }).strict(),
  output: z.object({ login: CliLogin }),
  run: (deps, _actor, input) => cliLogins.getCliLogin(deps, input.code),
});

export const approveCliLogin = defineOperation({
  name: 'approve_cli_login',
  description: 'Approve a CLI login for this account: the CLI receives a new API key with the permission chosen',
  permission: 'WRITE',
  audience: 'users',
  input: withParams(z.object({ code: z.string().max(20) }), z.object({ permission: Permission })),
  output: z.object({ login: CliLogin }),
  run: (deps, actor, input) => cliLogins.approveCliLogin(deps, actor, input.code, input.permission),
});

export const changePassword = defineOperation({
  name: 'change_password',
  description: 'Change your password; your other sessions end at once',
  permission: 'WRITE',
  audience: 'users',
  input: z.object({ currentPassword: z.string().max(1024), newPassword: z.string().max(1024) }).strict(),
  output: z.object({ changed: z.literal(true) }),
  run: (deps, actor, input) => changeOwnPassword(deps, actor, input),
});

export const getUsage = defineOperation({
  name: 'get_usage',
  description:
    'The account’s model calls today (UTC) against its daily allowance, the bytes its files hold against its storage limit, and the bytes its site databases’ replicas and previews’ branches take',
  permission: 'READ',
  input: z.object({}).strict(),
  output: z.object({ usage: AccountUsage }),
  run: async (deps, actor) => ({
    usage: {
      ...(await modelCallsToday(deps, actor.accountId)),
      storage: {
        ...(await deps.storageQuota.usage(actor.accountId)),
        databaseReplicaBytes: await databaseReplicaBytes(deps, actor.accountId),
        databaseBranchBytes: await branchBytes(deps, actor.accountId),
      },
    },
  }),
});
