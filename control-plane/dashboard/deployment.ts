// One deployment's page: what it is (kind, status with each file's error, author, message, size,
// times, preview link, who the preview answers and whether it has the site's secrets, the branch of
// the database its preview runs on), "Roll back to
// this", its diff against the state before it and the files it set (those purged since, marked).
import { api, get } from './api.ts';
import { type Child, actionButton, fill, formatBytes, h, statusLine, table, time } from './dom.ts';
import {
  KIND_LABELS,
  authorLabel,
  deploymentHref,
  messageOf,
  previewLink,
  problemList,
  stateBadges,
} from './deployments.ts';
import { canRollBackTo, rollBack } from './rollback.ts';
import { type Route, go, href } from './router.ts';
import { fact, siteFrame } from './sites.ts';
import type { DeploymentDetail } from './types.ts';

/** Files listed before a "Show all" (a deployment may set thousands). */
const FIRST_FILES = 200;

type Entry = DeploymentDetail['fileList'][number];

/** The branch of the site's database its preview runs on: what it is a copy of, or why it failed. */
function branchFact(siteId: string, branch: NonNullable<DeploymentDetail['databaseBranch']>): Child {
  if (branch.status === 'FAILED')
    return h('span', { class: 'status error' }, `Its migrations failed on it: ${branch.error}`);
  if (branch.status === 'MAKING') return 'A branch of the database is being made';
  return [
    branch.madeFrom === 'history' ? 'A branch of the database as it was at ' : 'A copy of the database made at ',
    time(branch.asOf),
    ` (${formatBytes(branch.bytes)}): what the preview writes stays on it. `,
    h('a', { href: href('sites', siteId, 'database', { branch: branch.branch }) }, 'Browse its tables'),
  ];
}

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const id = route.segments[3]!;
  const { deployment: d } = await get<{ deployment: DeploymentDetail }>(
    `/v0/sites/${encodeURIComponent(site.id)}/deployments/${encodeURIComponent(id)}`,
  );
  const status = statusLine();
  const change = async (body: { previewAccess?: 'PRIVATE' | 'PUBLIC'; previewSecrets?: boolean }) => {
    await api('POST', `/v0/sites/${encodeURIComponent(site.id)}/deployments/${encodeURIComponent(d.id)}`, body);
    await render(root, route);
  };

  const diffPart = (title: string, paths: string[]): HTMLElement =>
    h(
      'div',
      { class: 'diff-part' },
      h('h3', null, `${title} (${paths.length})`),
      paths.length > 0
        ? h(
            'ul',
            { class: 'paths', 'aria-label': title },
            paths.map((p) => h('li', { class: 'mono' }, p)),
          )
        : h('p', { class: 'hint' }, 'None'),
    );

  const filesEl = h('div');
  const drawFiles = (entries: Entry[]): void =>
    fill(
      filesEl,
      table<Entry>(
        `Files of ${d.shortId}`,
        [
          { label: 'Path', cell: (f) => h('span', { class: 'mono' }, f.path) },
          {
            label: 'Change',
            cell: (f) => (f.sha256 === null ? 'Removed' : f.purged ? 'Purged' : formatBytes(f.bytes)),
          },
          { label: 'Type', cell: (f) => (f.contentType ? h('span', { class: 'mono' }, f.contentType) : '–') },
        ],
        entries,
        'This deployment set no files.',
      ),
      entries.length < d.fileList.length
        ? h(
            'div',
            { class: 'actions' },
            actionButton(`Show all ${d.fileList.length} files`, async () => drawFiles(d.fileList)),
          )
        : null,
    );
  drawFiles(d.fileList.slice(0, FIRST_FILES));

  const facts: Child[] = [
    fact('Kind', KIND_LABELS[d.kind]),
    fact('Status', stateBadges(d)),
    fact('Message', messageOf(d)),
    fact('Author', authorLabel(d.author)),
    fact('Files', `${d.files} ${d.files === 1 ? 'file' : 'files'}, ${formatBytes(d.bytes)}`),
    fact('Started', time(d.createdAt)),
    fact('Published', time(d.publishedAt)),
    d.sourceDeploymentId
      ? fact(
          'Rolled back to',
          h('a', { href: href('sites', site.id, 'deployments', d.sourceDeploymentId) }, 'the deployment it repeats'),
        )
      : null,
    d.restoredAt ? fact('Restored to', time(d.restoredAt)) : null,
    fact('Preview', [previewLink(d), ' ', h('span', { class: 'hint mono' }, hostOf(d.previewUrl))]),
    fact('Preview opens for', [
      d.previewAccess === 'PUBLIC' ? 'Anyone, as the live site ' : 'Members of the account only ',
      actionButton(
        d.previewAccess === 'PUBLIC' ? 'Members only' : 'Make public',
        () => change({ previewAccess: d.previewAccess === 'PUBLIC' ? 'PRIVATE' : 'PUBLIC' }),
        { status },
      ),
    ]),
    fact('Preview secrets', [
      d.previewSecrets ? 'Its functions get the site’s secrets ' : 'Not given to its functions ',
      actionButton(
        d.previewSecrets ? 'Take back' : 'Give secrets',
        () => change({ previewSecrets: !d.previewSecrets }),
        { status },
      ),
    ]),
    d.databaseBranch ? fact('Preview database', branchFact(site.id, d.databaseBranch)) : null,
    d.purgedFiles > 0 ? fact('Purged', `${d.purgedFiles} of its files were deleted for good since`) : null,
    fact('Id', h('span', { class: 'mono' }, d.id)),
  ];

  fill(
    body,
    h('p', { class: 'crumbs' }, h('a', { href: href('sites', site.id, 'deployments') }, 'All deployments')),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Deployment ', h('span', { class: 'mono' }, d.shortId)),
      h('dl', { class: 'facts' }, facts),
      d.errors && d.errors.length > 0
        ? [h('h3', null, 'Why it failed (the site did not change)'), problemList(d.errors)]
        : null,
      d.status === 'UPLOADING' && d.missing.length > 0
        ? h('p', { class: 'hint' }, `${d.missing.length} files still to upload before it can be published.`)
        : null,
      canRollBackTo(d)
        ? h(
            'div',
            { class: 'actions' },
            actionButton(
              'Roll back to this',
              async () => {
                const made = await rollBack(site.id, d);
                if (made) go(deploymentHref(made));
              },
              { status, class: 'primary', ariaLabel: `Roll back to ${d.shortId}` },
            ),
          )
        : null,
      status.el,
    ),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Changes'),
      h(
        'p',
        { class: 'hint' },
        d.status === 'PUBLISHED'
          ? 'Against the site’s files just before it was published.'
          : 'Against the site’s files now.',
      ),
      h(
        'div',
        { class: 'diff' },
        diffPart('Added', d.diff.added),
        diffPart('Changed', d.diff.changed),
        diffPart('Removed', d.diff.removed),
      ),
    ),
    packagesCard(d),
    h('section', { class: 'card' }, h('h2', null, 'Files it set'), filesEl),
  );
}

/** The npm packages its functions are built with, and what its deno.lock changed of them. */
function packagesCard(d: DeploymentDetail): HTMLElement {
  const changes = d.diff.packages;
  const changed = [
    ...changes.added.map((p) => `+ ${p.name}@${p.version}`),
    ...changes.changed.map((p) => `~ ${p.name} ${p.from.join(', ')} → ${p.to.join(', ')}`),
    ...changes.removed.map((p) => `− ${p.name}@${p.version}`),
  ];
  return h(
    'section',
    { class: 'card' },
    h('h2', null, `Packages (${d.packages.length})`),
    d.packages.length > 0
      ? h(
          'ul',
          { class: 'paths', 'aria-label': 'Packages' },
          d.packages.map((p) => h('li', { class: 'mono', title: p.integrity ?? '' }, `${p.name}@${p.version}`)),
        )
      : h('p', { class: 'hint' }, 'None: its functions import no npm package.'),
    changed.length > 0
      ? h(
          'ul',
          { class: 'paths', 'aria-label': 'Package changes' },
          changed.map((line) => h('li', { class: 'mono' }, line)),
        )
      : null,
  );
}

const hostOf = (url: string): string => {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
};
