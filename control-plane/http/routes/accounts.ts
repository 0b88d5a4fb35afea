import * as accounts from '../../operations/accounts.ts';
import type { OperationRoute } from '../route.ts';

export const accountRoutes: OperationRoute[] = [
  {
    operation: accounts.getCurrentAccount,
    method: 'GET',
    path: '/v0/accounts/current',
    operationId: 'getCurrentAccount',
    tag: 'Accounts',
    ok: 'the account',
  },
  {
    operation: accounts.getAccount,
    method: 'GET',
    path: '/v0/accounts/:accountId',
    operationId: 'getAccount',
    tag: 'Accounts',
    ok: 'the account',
  },
  {
    operation: accounts.updateAccount,
    method: 'POST',
    path: '/v0/accounts/:accountId',
    operationId: 'updateAccount',
    tag: 'Accounts',
    ok: 'the updated account',
  },
];
