// Deployments: a site changed all at once, its history, and going back to an earlier deployment or to
// any instant (deployments/deployments.ts). Bytes are uploaded by a REST route of their own
// (http/routes/deployments.ts); create_deployment also takes files' text inline, for JSON-only doors.
import { z } from 'zod';
import * as deployments from '../deployments/deployments.ts';
import { restoreSiteWhole, snapshotWithDatabase } from '../deployments/whole-restore.ts';
import {
  CreateDeploymentBody,
  DeploymentDetail,
  DeploymentRecord,
  PageQuery,
  Pagination,
  RestoreSiteBody,
  SiteParams,
  SiteSnapshot,
  SnapshotFile,
  UpdateDeploymentBody,
  Uuid,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

const DeploymentParams = SiteParams.extend({ deploymentId: Uuid });
const OneDeployment = z.object({ deployment: DeploymentDetail });

export const listDeployments = defineOperation({
  name: 'list_deployments',
  description: 'A site’s deployments, newest first: every change to its files, with who made it',
  permission: 'READ',
  input: SiteParams.extend(PageQuery.shape).extend({
    kind: z
      .string()
      .regex(/^(DEPLOY|FILE|PROMOTE|RESTORE|BASELINE)(,(DEPLOY|FILE|PROMOTE|RESTORE|BASELINE))*$/, {
        error: 'kinds are DEPLOY, FILE, PROMOTE, RESTORE and BASELINE, comma-separated',
      })
      .optional()
      .describe('only these kinds, comma-separated, e.g. DEPLOY,PROMOTE,RESTORE'),
  }),
  output: z.object({ deployments: z.array(DeploymentRecord), pagination: Pagination }),
  run: (deps, actor, { siteId, kind, ...page }) =>
    deployments.listDeployments(deps, actor, siteId, page, {
      kinds: kind?.split(',') as Array<'DEPLOY' | 'FILE' | 'PROMOTE' | 'RESTORE' | 'BASELINE'> | undefined,
    }),
});

export const getDeployment = defineOperation({
  name: 'get_deployment',
  description: 'One deployment with its files and its diff against the state before it',
  permission: 'READ',
  input: DeploymentParams,
  output: OneDeployment,
  run: (deps, actor, input) => deployments.getDeployment(deps, actor, input.siteId, input.deploymentId),
});

export const createDeployment = defineOperation({
  name: 'create_deployment',
  description:
    'Start a deployment: declare the whole set of files (by sha256 and size, or with their text as content); `missing` lists the bytes to upload before publish_deployment',
  permission: 'WRITE',
  input: withParams(SiteParams, CreateDeploymentBody),
  output: z.object({ deployment: DeploymentRecord.extend({ missing: z.array(z.string()) }) }),
  run: (deps, actor, { siteId, ...body }) => deployments.createDeployment(deps, actor, siteId, body),
});

export const updateDeployment = defineOperation({
  name: 'update_deployment',
  description:
    'Say who may open a deployment’s preview host (PUBLIC: anyone, as the live site; PRIVATE: members) and whether its functions get the site’s secrets',
  permission: 'WRITE',
  input: withParams(DeploymentParams, UpdateDeploymentBody).refine(
    (input) => input.previewAccess !== undefined || input.previewSecrets !== undefined,
    { message: 'give previewAccess, previewSecrets or both' },
  ),
  output: OneDeployment,
  run: (deps, actor, { siteId, deploymentId, ...changes }) =>
    deployments.updateDeployment(deps, actor, siteId, deploymentId, changes),
});

export const publishDeployment = defineOperation({
  name: 'publish_deployment',
  description:
    'Publish a deployment: every function is checked first, then all its files go live at once; a failure changes nothing',
  permission: 'WRITE',
  input: DeploymentParams,
  output: OneDeployment,
  run: (deps, actor, input) => deployments.publishDeployment(deps, actor, input.siteId, input.deploymentId),
});

export const promoteDeployment = defineOperation({
  name: 'promote_deployment',
  description: 'Make the site what it was right after an earlier deployment (a rollback), as a new deployment',
  permission: 'WRITE',
  input: DeploymentParams,
  output: OneDeployment,
  run: (deps, actor, input) => deployments.promoteDeployment(deps, actor, input.siteId, input.deploymentId),
});

export const restoreSite = defineOperation({
  name: 'restore_site',
  description:
    'Put the site’s files and functions back to what they were at an instant, as a new deployment; with database, its database too, to the same second',
  permission: 'WRITE',
  input: withParams(SiteParams, RestoreSiteBody),
  output: OneDeployment,
  run: (deps, actor, input) =>
    input.database
      ? restoreSiteWhole(deps, actor, input.siteId, input.at)
      : deployments.restoreSite(deps, actor, input.siteId, input.at),
});

export const getSiteSnapshot = defineOperation({
  name: 'get_site_snapshot',
  description:
    'What the site’s files were at an instant (what restore_site would make them); with database=true, its database’s tables then and now too',
  permission: 'READ',
  input: SiteParams.extend({
    at: z.string().describe('an RFC 3339 time'),
    database: z
      .enum(['true', 'false'])
      .optional()
      .describe('true: what a whole restore would do to the database too (each table’s rows then and now)'),
  }).extend(PageQuery.shape),
  output: z.object({ snapshot: SiteSnapshot, files: z.array(SnapshotFile), pagination: Pagination }),
  run: (deps, actor, { siteId, at, database, ...page }) =>
    snapshotWithDatabase(deps, actor, siteId, at, page, database === 'true'),
});

export const cancelDeployment = defineOperation({
  name: 'cancel_deployment',
  description: 'Give up a deployment that is still uploading; the site is not changed',
  permission: 'WRITE',
  destructive: true,
  input: DeploymentParams,
  output: OneDeployment,
  run: (deps, actor, input) => deployments.cancelDeployment(deps, actor, input.siteId, input.deploymentId),
});
