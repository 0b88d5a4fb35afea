import * as secrets from '../../operations/secrets.ts';
import type { OperationRoute } from '../route.ts';

export const secretRoutes: OperationRoute[] = [
  {
    operation: secrets.listSecrets,
    method: 'GET',
    path: '/v0/sites/:siteId/secrets',
    operationId: 'listSecrets',
    tag: 'Secrets',
    ok: 'a page of secret names',
  },
  {
    operation: secrets.getSecretValue,
    method: 'GET',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'getSecretValue',
    tag: 'Secrets',
    ok: 'the secret with its value',
    headers: { 'Cache-Control': 'private, no-store' },
  },
  {
    operation: secrets.listSecretAccessLogs,
    method: 'GET',
    path: '/v0/sites/:siteId/secret_access_logs',
    operationId: 'listSecretAccessLogs',
    tag: 'Secrets',
    ok: 'a page of access log entries',
  },
  {
    operation: secrets.setSecret,
    method: 'POST',
    path: '/v0/sites/:siteId/secrets',
    operationId: 'setSecret',
    tag: 'Secrets',
    ok: 'the secret’s name and update time',
  },
  {
    operation: secrets.replaceSecret,
    method: 'POST',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'replaceSecret',
    tag: 'Secrets',
    ok: 'the secret’s name and update time',
  },
  {
    operation: secrets.deleteSecret,
    method: 'DELETE',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'deleteSecret',
    tag: 'Secrets',
    ok: 'deleted',
  },
];
