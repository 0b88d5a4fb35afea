// Accounts: the key's own account, and renaming it.
import { z } from 'zod';
import * as accounts from '../services/accounts.ts';
import { Account, UpdateAccountBody, Uuid } from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

const AccountParams = z.object({ accountId: Uuid });

export const getCurrentAccount = defineOperation({
  name: 'get_current_account',
  description: 'The account that owns the credential',
  permission: 'READ',
  input: z.object({}),
  output: Account,
  run: (deps, actor) => accounts.getAccount(deps, actor, actor.accountId),
});

export const getAccount = defineOperation({
  name: 'get_account',
  description: 'An account the credential may access',
  permission: 'READ',
  input: AccountParams,
  output: Account,
  run: (deps, actor, input) => accounts.getAccount(deps, actor, input.accountId),
});

export const updateAccount = defineOperation({
  name: 'update_account',
  description: 'Rename an account',
  permission: 'WRITE',
  input: withParams(AccountParams, UpdateAccountBody),
  output: Account,
  run: (deps, actor, { accountId, ...changes }) => accounts.updateAccount(deps, actor, accountId, changes),
});
