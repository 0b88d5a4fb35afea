import { z } from 'zod';
import * as secrets from '../../services/secrets.ts';
import { PageQuery, Pagination, ReplaceSecretBody, SecretAccessLog, SecretMetadata, SecretName, SetSecretBody, SiteParams, Uuid } from '../../schemas.ts';
import { defineRoute } from '../route.ts';

const SecretParams = z.object({ siteId: Uuid, name: SecretName });

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
    handler: ({ deps, actor, params, query }) => secrets.listSecrets(deps, actor, params.siteId, query),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'getSecretValue',
    summary: 'Read a secret’s value; the read is recorded in the access log',
    tag: 'Secrets',
    params: SecretParams,
    responses: { 200: { description: 'the secret with its value', schema: z.object({ secret: z.object({ name: z.string(), value: z.string() }) }) } },
    handler: ({ deps, actor, params, ctx }) => {
      ctx.set('Cache-Control', 'private, no-store');
      return secrets.getSecretValue(deps, actor, params.siteId, params.name);
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
    handler: ({ deps, actor, params, query }) => secrets.listAccessLogs(deps, actor, params.siteId, query),
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
    handler: ({ deps, actor, params, body }) => secrets.setSecret(deps, actor, params.siteId, body),
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
    handler: ({ deps, actor, params, body }) => secrets.setSecret(deps, actor, params.siteId, { name: params.name, value: body.value }, true),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v0/sites/:siteId/secrets/:name',
    operationId: 'deleteSecret',
    summary: 'Delete a secret; functions reading it then get null',
    tag: 'Secrets',
    params: SecretParams,
    responses: { 200: { description: 'deleted', schema: z.object({ deleted: z.literal(true) }) } },
    handler: ({ deps, actor, params }) => secrets.deleteSecret(deps, actor, params.siteId, params.name),
  }),
];
