// `berth stats`: a site's traffic since a moment — totals, a chart of requests, the top paths and
// referrer hosts — from GET /v0/sites/:siteId/analytics.
import { formatBytes } from '../../format-bytes.ts';
import type { AnalyticsResult, Point } from '../../services/analytics.ts';
import type { CommandDefinition } from '../command.ts';
import { momentOf } from '../moments.ts';
import { textChart } from '../text-chart.ts';
import { UsageError } from '../usage-error.ts';

const STEPS = new Set(['minute', 'hour', 'day']);

const count = (n: number) => n.toLocaleString('en');
const ms = (value: number | null) => (value === null ? '-' : `${value} ms`);
/** A series point's moment, short: the date and the time of day in UTC. */
const short = (at: string) => `${at.slice(5, 10)} ${at.slice(11, 16)}`;

function render(subdomain: string, since: string, stats: AnalyticsResult): string {
  const { totals, series } = stats;
  const lines = [
    `${subdomain}: since ${since} (by the ${stats.step}, UTC)`,
    '',
    `requests     ${count(totals.requests)}   2xx ${count(totals.status['2xx'])}  3xx ${count(totals.status['3xx'])}  4xx ${count(totals.status['4xx'])}  5xx ${count(totals.status['5xx'])}`,
    `latency      p50 ${ms(totals.p50Ms)}  p95 ${ms(totals.p95Ms)}  p99 ${ms(totals.p99Ms)}`,
    `sent         ${formatBytes(totals.bytesOut)}`,
    `functions    ${count(totals.functionInvocations)} calls, ${count(totals.functionErrors)} errors, ${count(totals.coldStarts)} cold starts; p50 ${ms(totals.functionP50Ms)}  p95 ${ms(totals.functionP95Ms)}`,
    `database     ${count(totals.databaseCalls)} calls`,
  ];
  const chart = (title: string, value: (point: Point) => number) =>
    lines.push('', textChart(title, series.map(value), short(series[0]!.at), short(series.at(-1)!.at)));
  if (series.length > 0) {
    chart('requests', (p) => p.requests);
    if (totals.functionErrors > 0) chart('function errors', (p) => p.functionErrors);
  }
  const table = (title: string, rows: Array<[string, number]>) => {
    if (rows.length === 0) return;
    const width = Math.max(...rows.map(([, n]) => count(n).length));
    lines.push('', title, ...rows.map(([name, n]) => `  ${count(n).padStart(width)}  ${name}`));
  };
  table(
    'top paths',
    stats.topPaths.map((p) => [p.path, p.requests]),
  );
  table(
    'top referrers',
    stats.topReferrers.map((r) => [r.host, r.requests]),
  );
  return lines.join('\n');
}

export const statsCommand: CommandDefinition = {
  usage: 'stats',
  summary: 'the site’s traffic: requests by status, latency, functions, top paths and referrers, with a chart',
  examples: ['berth stats --site hello', 'berth stats --site hello --since 7d', 'berth stats --site hello --json'],
  site: true,
  options: [
    {
      flags: '--since <time>',
      description: 'from when: how long ago (1h, 24h, 7d) or an RFC 3339 time',
      default: '24h',
    },
    { flags: '--step <step>', description: 'minute, hour or day (default: chosen by the range)' },
  ],
  async run({ options, out, api, site }) {
    const from = momentOf(String(options.since), '--since');
    const step = options.step as string | undefined;
    if (step !== undefined && !STEPS.has(step)) throw new UsageError('--step is minute, hour or day');
    const target = await site();
    const stats = await api().get<AnalyticsResult>(`sites/${target.id}/analytics`, {
      from,
      ...(step ? { step } : {}),
    });
    out.print(stats, render(target.subdomain, String(options.since), stats));
  },
};
