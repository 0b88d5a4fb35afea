import { z } from 'zod';
import * as accounts from '../../services/accounts.ts';
import { Account, UpdateAccountBody, Uuid } from '../../schemas.ts';
import { defineRoute } from '../route.ts';

const AccountParams = z.object({ accountId: Uuid });

export const accountRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v0/accounts/current',
    operationId: 'getCurrentAccount',
    summary: 'The account that owns the API key',
    tag: 'Accounts',
    responses: { 200: { description: 'the account', schema: Account } },
    handler: ({ deps, actor }) => accounts.getAccount(deps, actor, actor.accountId),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/accounts/:accountId',
    operationId: 'getAccount',
    summary: 'An account the key may access',
    tag: 'Accounts',
    params: AccountParams,
    responses: { 200: { description: 'the account', schema: Account } },
    handler: ({ deps, actor, params }) => accounts.getAccount(deps, actor, params.accountId),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/accounts/:accountId',
    operationId: 'updateAccount',
    summary: 'Rename an account',
    tag: 'Accounts',
    params: AccountParams,
    body: UpdateAccountBody,
    responses: { 200: { description: 'the updated account', schema: Account } },
    handler: ({ deps, actor, params, body }) => accounts.updateAccount(deps, actor, params.accountId, body),
  }),
];
