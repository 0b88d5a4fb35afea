import type Koa from 'koa';
import { z } from 'zod';
import * as secrets from '../../services/secrets.ts';
import { PageQuery, Pagination, ReplaceSecretBody, SecretAccessLog, SecretMetadata, SecretName, SetSecretBody, SiteParams, Uuid } from '../../schemas.ts';
import { defineRoute } from '../route.ts';

const SecretParams = z.object({ siteId: Uuid, name: SecretName });

/** The channel recorded in the access log: Berth's CLI and dashboard say who they are. */
function channel(ctx: Koa.Context): secrets.AccessChannel {
  const client = ctx.get('Berth-Client').toLowerCase();
  return client === 'cli' ? 'CLI' : client === 'dashboard' ? 'DASHBOARD' : 'API';
}

export const secretRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/secrets',
    operationId: 'listSecrets',
    summary: 'List a site’s secrets by name (no values)',
    tag: 'Secrets',
    params: SiteParams,
    query: PageQuery,
    responses: { 200: { description: 'a page of secret names', schema: z.object({ secrets: z.array(SecretMetadata), pagination: Pagination }) } },
    handler: ({ deps, caller, params, query }) => secrets.listSecrets(deps, caller, params.siteId, query),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'getSecretValue',
    summary: 'Read a secret’s value; the read is recorded in the access log',
    tag: 'Secrets',
    params: SecretParams,
    headers: { 'Berth-Client': '"cli" or "dashboard" when those read the value; recorded in the access log' },
    responses: { 200: { description: 'the secret with its value', schema: z.object({ secret: z.object({ name: z.string(), value: z.string() }) }) } },
    handler: ({ deps, caller, params, ctx }) => {
      ctx.set('Cache-Control', 'private, no-store');
      return secrets.getSecretValue(deps, caller, params.siteId, params.name, channel(ctx));
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/secret_access_logs',
    operationId: 'listSecretAccessLogs',
    summary: 'Who read which secret value, through what, and when; newest first',
    tag: 'Secrets',
    params: SiteParams,
    query: PageQuery,
    responses: { 200: { description: 'a page of access log entries', schema: z.object({ accessLogs: z.array(SecretAccessLog), pagination: Pagination }) } },
    handler: ({ deps, caller, params, query }) => secrets.listAccessLogs(deps, caller, params.siteId, query),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/secrets',
    operationId: 'setSecret',
    summary: 'Create or replace a secret; the value is never echoed',
    tag: 'Secrets',
    params: SiteParams,
    body: SetSecretBody,
    responses: { 200: { description: 'the secret’s name and update time', schema: z.object({ secret: SecretMetadata }) } },
    handler: ({ deps, caller, params, body }) => secrets.setSecret(deps, caller, params.siteId, body),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'replaceSecret',
    summary: 'Replace an existing secret’s value; the value is never echoed',
    tag: 'Secrets',
    params: SecretParams,
    body: ReplaceSecretBody,
    responses: { 200: { description: 'the secret’s name and update time', schema: z.object({ secret: SecretMetadata }) } },
    handler: ({ deps, caller, params, body }) => secrets.setSecret(deps, caller, params.siteId, { name: params.name, value: body.value }, true),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'deleteSecret',
    summary: 'Delete a secret; functions reading it then get null',
    tag: 'Secrets',
    params: SecretParams,
    responses: { 200: { description: 'deleted', schema: z.object({ deleted: z.literal(true) }) } },
    handler: ({ deps, caller, params }) => secrets.deleteSecret(deps, caller, params.siteId, params.name),
  }),
];
