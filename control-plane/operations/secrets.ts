// Site secrets: set and delete by name; values are read back only by get_secret_value, which is
// recorded in the access log.
import { z } from 'zod';
import * as secrets from '../services/secrets.ts';
import {
  PageQuery,
  Pagination,
  ReplaceSecretBody,
  SecretAccessLog,
  SecretMetadata,
  SecretName,
  SecretValue,
  SetSecretBody,
  SiteParams,
  Uuid,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

const SecretParams = z.object({ siteId: Uuid, name: SecretName });
const SecretWritten = z.object({ secret: SecretMetadata });

export const listSecrets = defineOperation({
  name: 'list_secrets',
  description: 'List a site’s secrets by name (no values)',
  permission: 'READ',
  input: SiteParams.extend(PageQuery.shape),
  output: z.object({ secrets: z.array(SecretMetadata), pagination: Pagination }),
  run: (deps, actor, { siteId, ...page }) => secrets.listSecrets(deps, actor, siteId, page),
});

export const getSecretValue = defineOperation({
  name: 'get_secret_value',
  description: 'Read a secret’s value; the read is recorded in the access log',
  permission: 'READ',
  input: SecretParams,
  output: z.object({ secret: SecretValue }),
  run: (deps, actor, input) => secrets.getSecretValue(deps, actor, input.siteId, input.name),
});

export const listSecretAccessLogs = defineOperation({
  name: 'list_secret_access_logs',
  description: 'Who read which secret value, through what, and when; newest first',
  permission: 'READ',
  input: SiteParams.extend(PageQuery.shape),
  output: z.object({ accessLogs: z.array(SecretAccessLog), pagination: Pagination }),
  run: (deps, actor, { siteId, ...page }) => secrets.listAccessLogs(deps, actor, siteId, page),
});

export const setSecret = defineOperation({
  name: 'set_secret',
  description: 'Create or replace a secret; the value is never echoed',
  permission: 'WRITE',
  input: withParams(SiteParams, SetSecretBody),
  output: SecretWritten,
  run: (deps, actor, { siteId, ...secret }) => secrets.setSecret(deps, actor, siteId, secret),
});

export const replaceSecret = defineOperation({
  name: 'replace_secret',
  description: 'Replace an existing secret’s value; the value is never echoed',
  permission: 'WRITE',
  input: withParams(SecretParams, ReplaceSecretBody),
  output: SecretWritten,
  run: (deps, actor, { siteId, ...secret }) => secrets.setSecret(deps, actor, siteId, secret, true),
});

export const deleteSecret = defineOperation({
  name: 'delete_secret',
  description: 'Delete a secret; functions reading it then get null',
  permission: 'WRITE',
  destructive: true,
  input: SecretParams,
  output: z.object({ deleted: z.literal(true) }),
  run: (deps, actor, input) => secrets.deleteSecret(deps, actor, input.siteId, input.name),
});
