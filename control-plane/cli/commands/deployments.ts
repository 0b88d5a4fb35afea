// `berth deployments publish` and `berth rollback`, and the text of `berth deployments ls|get` (those
// two are generated from the catalogue). A deployment is named by its id or its short id.
import { formatBytes } from '../../format-bytes.ts';
import { ApiError } from '../cli-error.ts';
import type { CommandDefinition } from '../command.ts';
import {
  type Deployment,
  type DeploymentDetail,
  type FileProblem,
  diffCounts,
  problemLine,
} from '../deploy/deployment.ts';
import { findDeployment, previousDeployment } from '../deploy/deployment-ref.ts';
import { EXIT } from '../exit-codes.ts';
import { UsageError } from '../usage-error.ts';

/** `PROMOTE of 3f9k2m1q`, `RESTORE to 2026-…`: where a deployment's files came from. */
function origin(deployment: Deployment, byId: Map<string, Deployment>): string {
  if (deployment.kind === 'PROMOTE' && deployment.sourceDeploymentId)
    return `back to ${byId.get(deployment.sourceDeploymentId)?.shortId ?? deployment.sourceDeploymentId}`;
  if (deployment.kind === 'RESTORE' && deployment.restoredAt) return `back to ${deployment.restoredAt}`;
  return deployment.message ?? '';
}

export function deploymentsText(answer: { deployments: Deployment[] }): string {
  if (answer.deployments.length === 0) return '(no deployments yet: berth deploy <dir> --site <site>)';
  const byId = new Map(answer.deployments.map((d) => [d.id, d]));
  const rows = [
    ['', 'ID', 'KIND', 'STATUS', 'WHEN', 'FILES', 'BYTES', 'AUTHOR', 'MESSAGE'],
    ...answer.deployments.map((d) => [
      d.current ? '*' : '',
      d.shortId,
      d.kind,
      d.status,
      d.publishedAt ?? d.createdAt,
      String(d.files),
      formatBytes(d.bytes),
      d.author,
      origin(d, byId),
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

const packageChangeCount = (changes: DeploymentDetail['diff']['packages']): number =>
  changes.added.length + changes.changed.length + changes.removed.length;

/** Its preview's branch of the site's database, in one line. */
function branchLine(branch: NonNullable<DeploymentDetail['databaseBranch']>): string {
  if (branch.status === 'FAILED') return `database branch: FAILED: ${branch.error}`;
  if (branch.status === 'MAKING') return 'database branch: being made';
  const source = branch.madeFrom === 'history' ? 'the database as it was at' : 'a copy of the database at';
  return `database branch: ${source} ${branch.asOf} (${formatBytes(branch.bytes)}); query it with --branch ${branch.branch}`;
}

export function deploymentText(answer: { deployment: DeploymentDetail }): string {
  const d = answer.deployment;
  const lines = [
    `deployment ${d.shortId} (${d.id})`,
    `kind: ${d.kind}`,
    `status: ${d.status}${d.current ? ' (current: the site serves it)' : ''}`,
    `author: ${d.author}`,
    ...(d.message ? [`message: ${d.message}`] : []),
    `created: ${d.createdAt}`,
    ...(d.publishedAt ? [`published: ${d.publishedAt}`] : []),
    `files: ${d.files} (${formatBytes(d.bytes)})`,
    `preview: ${d.previewUrl}`,
    ...(d.databaseBranch ? [branchLine(d.databaseBranch)] : []),
    ...(d.errors ?? []).map((problem) => `error: ${problemLine(problem)}`),
    `diff: ${diffCounts(d.diff)}`,
    ...d.diff.added.map((path) => `  + ${path}`),
    ...d.diff.changed.map((path) => `  ~ ${path}`),
    ...d.diff.removed.map((path) => `  - ${path}`),
    ...(d.packages.length > 0 || packageChangeCount(d.diff.packages) > 0
      ? [
          `packages: ${d.packages.map((p) => `${p.name}@${p.version}`).join(', ') || 'none'}`,
          ...d.diff.packages.added.map((p) => `  + ${p.name}@${p.version}`),
          ...d.diff.packages.changed.map((p) => `  ~ ${p.name} ${p.from.join(', ')} → ${p.to.join(', ')}`),
          ...d.diff.packages.removed.map((p) => `  - ${p.name}@${p.version}`),
        ]
      : []),
  ];
  return lines.join('\n');
}

/** A deployment made live: what it changed, and where. */
function liveText(deployment: DeploymentDetail, siteUrl: string, what: string): string {
  return [`${what}: ${diffCounts(deployment.diff)}`, `preview: ${deployment.previewUrl}`, `live:    ${siteUrl}`].join(
    '\n',
  );
}

export const deploymentsPublishCommand: CommandDefinition = {
  usage: 'publish <id>',
  summary:
    'publish a deployment uploaded with `berth deploy --preview`: its functions are checked, then all its files go live at once',
  examples: ['berth deployments publish 3f9k2m1q --site blog', 'berth deployments publish 3f9k2m1q --site blog --json'],
  site: true,
  async run({ args, out, api, site }) {
    const client = api();
    const target = await site();
    const deployment = await findDeployment(client, target, args[0]!);
    try {
      const answer = await client.post<{ deployment: DeploymentDetail }>(
        `sites/${target.id}/deployments/${deployment.id}/publish`,
      );
      out.print(answer, liveText(answer.deployment, target.url, `deployment ${deployment.shortId} published`));
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'deployment_failed' || out.json) throw err;
      const problems = (err.details?.errors as FileProblem[] | undefined) ?? [];
      out.print(
        null,
        [...problems.map(problemLine), `deployment ${deployment.shortId} FAILED: nothing about the site changed`].join(
          '\n',
        ),
      );
      return EXIT.FAILED;
    }
  },
};

export const rollbackCommand: CommandDefinition = {
  usage: 'rollback [id]',
  summary:
    'make the site what it was before its last deployment, or after deployment <id>, or at an instant (--to); recorded as a new deployment',
  examples: [
    'berth rollback --site blog                                # the site as it was before its last deployment',
    'berth rollback 3f9k2m1q --site blog                       # as right after deployment 3f9k2m1q',
    'berth rollback --to 2026-11-26T12:00:00Z --site blog      # as at that instant',
    'berth rollback --to 2026-11-26T12:00:00Z --with-database --site blog   # and its database too',
  ],
  site: true,
  options: [
    { flags: '--to <time>', description: 'an RFC 3339 instant, e.g. 2026-11-26T12:00:00Z' },
    {
      flags: '--with-database',
      description:
        'with --to: the site’s database too, to the same second (undone by the same command to the moment it names)',
    },
  ],
  async run({ args, options, out, api, site }) {
    const ref = args[0];
    const to = typeof options.to === 'string' ? options.to : undefined;
    const withDatabase = options.withDatabase === true;
    if (ref !== undefined && to !== undefined) throw new UsageError('give a deployment or --to <time>, not both');
    if (withDatabase && to === undefined) throw new UsageError('--with-database goes with --to <time>');
    const client = api();
    const target = await site();
    if (to !== undefined) {
      const answer = await client.post<{ deployment: DeploymentDetail }>(`sites/${target.id}/restore`, {
        at: to,
        ...(withDatabase ? { database: true } : {}),
      });
      const restore = answer.deployment.databaseRestore;
      out.print(
        answer,
        [
          liveText(
            answer.deployment,
            target.url,
            `${target.subdomain} is back to ${answer.deployment.restoredAt}${restore ? ', its database too' : ''}`,
          ),
          ...(restore
            ? [`undo:    berth rollback --to ${restore.restoredFrom} --with-database --site ${target.subdomain}`]
            : []),
        ].join('\n'),
      );
      return;
    }
    let chosen: Deployment;
    let undone: Deployment | undefined;
    if (ref !== undefined) chosen = await findDeployment(client, target, ref);
    else ({ target: chosen, undone } = await previousDeployment(client, target));
    const answer = await client.post<{ deployment: DeploymentDetail }>(
      `sites/${target.id}/deployments/${chosen.id}/promote`,
    );
    const what = undone
      ? `${target.subdomain} is back to ${chosen.shortId}, before ${undone.shortId} (as deployment ${answer.deployment.shortId})`
      : `${target.subdomain} is back to ${chosen.shortId} (as deployment ${answer.deployment.shortId})`;
    out.print(answer, liveText(answer.deployment, target.url, what));
  },
};
