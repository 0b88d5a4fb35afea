// A site's functions and cron jobs: deployment status, compile errors with line and column, schedules
// and next runs, recent runs, and the functions' logs.
import { api, get } from './api.ts';
import { actionButton, badge, fill, h, statusLine, table, time } from './dom.ts';
import type { Route } from './router.ts';
import { siteFrame } from './sites.ts';
import type { CronRun, FunctionRecord, LogLine } from './types.ts';

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const base = `/v0/sites/${encodeURIComponent(site.id)}`;
  const status = statusLine();
  const functionsEl = h('div', { class: 'loading' }, 'Loading…');
  const runsEl = h('div', { class: 'loading' }, 'Loading…');
  const logsEl = h('div', { class: 'loading' }, 'Loading…');

  const loadFunctions = async () => {
    const { functions } = await get<{ functions: FunctionRecord[] }>(`${base}/functions`, { limit: 200 });
    fill(
      functionsEl,
      table<FunctionRecord>(
        'Functions',
        [
          { label: 'Source', cell: (f) => h('span', { class: 'mono' }, f.path) },
          { label: 'Kind', cell: (f) => (f.kind === 'api' ? 'endpoint' : 'cron job') },
          {
            label: 'Status',
            cell: (f) =>
              badge(f.status === 'ACTIVE' ? 'DEPLOYED' : 'FAILED', f.status === 'ACTIVE' ? 'ready' : 'failed'),
          },
          {
            label: 'Problem',
            cell: (f) =>
              f.lastError
                ? h(
                    'span',
                    { class: 'problem' },
                    h('span', { class: 'mono' }, `${f.path}:${f.lastError.line}:${f.lastError.column}`),
                    ' ',
                    f.lastError.message,
                    f.deployedVersionId ? ' (the previous version is still served)' : '',
                  )
                : '–',
          },
          { label: 'Schedule (UTC)', cell: (f) => (f.schedule ? h('span', { class: 'mono' }, f.schedule) : '–') },
          { label: 'Next run', cell: (f) => (f.kind === 'cron' ? time(f.nextRunAt) : '–') },
          { label: 'Deployed', cell: (f) => time(f.deployedAt) },
          {
            label: 'Actions',
            class: 'actions-cell',
            cell: (f) =>
              actionButton(
                'Deploy again',
                async () => {
                  await api('POST', `${base}/functions/deploy`, { path: f.path });
                  status.note(`${f.path} deployed.`);
                  await loadFunctions();
                },
                { status, ariaLabel: `Deploy ${f.path} again` },
              ),
          },
        ],
        functions,
        'No functions yet. Upload api/<name>.ts for an endpoint or cron/<name>.ts for a cron job in Files.',
      ),
    );
  };

  const loadRuns = async () => {
    const { runs } = await get<{ runs: CronRun[] }>(`${base}/cron_runs`, { limit: 50 });
    fill(
      runsEl,
      table<CronRun>(
        'Recent cron runs',
        [
          { label: 'Job', cell: (r) => h('span', { class: 'mono' }, r.path) },
          { label: 'Scheduled', cell: (r) => time(r.scheduledAt) },
          { label: 'Outcome', cell: (r) => badge(r.outcome) },
          {
            label: 'Took',
            cell: (r) => (r.startedAt && r.endedAt ? `${Date.parse(r.endedAt) - Date.parse(r.startedAt)} ms` : '–'),
          },
          { label: 'Error', cell: (r) => r.error ?? '' },
        ],
        runs,
        'No cron runs yet.',
      ),
    );
  };

  const loadLogs = async () => {
    const { logs } = await get<{ logs: LogLine[] }>(`${base}/logs`, { limit: 100 });
    fill(
      logsEl,
      table<LogLine>(
        'Function logs',
        [
          { label: 'Time', cell: (l) => time(l.createdAt) },
          { label: 'Level', cell: (l) => badge(l.level.toUpperCase(), l.level) },
          { label: 'Function', cell: (l) => h('span', { class: 'mono small' }, l.functionPath ?? '–') },
          { label: 'Message', class: 'log-message', cell: (l) => h('pre', { class: 'log' }, l.message) },
        ],
        logs,
        'Nothing logged yet.',
      ),
    );
  };

  fill(
    body,
    h(
      'section',
      { class: 'card' },
      h(
        'div',
        { class: 'section-head' },
        h('h2', null, 'Functions and cron jobs'),
        actionButton('Refresh', loadFunctions, { status, ariaLabel: 'Refresh functions' }),
      ),
      functionsEl,
      status.el,
    ),
    h(
      'section',
      { class: 'card' },
      h(
        'div',
        { class: 'section-head' },
        h('h2', null, 'Recent cron runs'),
        actionButton('Refresh', loadRuns, { status, ariaLabel: 'Refresh cron runs' }),
      ),
      runsEl,
    ),
    h(
      'section',
      { class: 'card' },
      h(
        'div',
        { class: 'section-head' },
        h('h2', null, 'Logs'),
        actionButton('Refresh', loadLogs, { status, ariaLabel: 'Refresh logs' }),
      ),
      logsEl,
    ),
  );
  await Promise.all([loadFunctions(), loadRuns(), loadLogs()]);
}
