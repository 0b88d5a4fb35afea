// A site's traffic as people read it: totals, a series at a step (minute, hour or day), and the top
// paths and referrer hosts, for one site or every site of an account. This node's counts are written
// first, so a read sees everything it served; other nodes' counts show within their flush interval.
import { invalid, notFound } from '../errors.ts';
import { quantileMs } from '../analytics/histogram.ts';
import { DAY, HOUR, MINUTE, type PeriodTally, readTallies } from '../analytics/store.ts';
import { type Tally, addTally, newTally, top } from '../analytics/tally.ts';
import type { Actor, Deps } from '../deps.ts';
import { requireSite } from './site-rows.ts';

export type Step = 'minute' | 'hour' | 'day';

const STEP_SECONDS: Record<Step, number> = { minute: MINUTE, hour: HOUR, day: DAY };
/** Points a series may have; a longer range asks for a coarser step. */
export const MAX_POINTS = 1500;
/** Entries of the top lists. */
const TOP = 10;

export interface AnalyticsRange {
  from?: string | undefined;
  to?: string | undefined;
  step?: Step | undefined;
}

export interface Counts {
  requests: number;
  status: { '2xx': number; '3xx': number; '4xx': number; '5xx': number };
  bytesOut: number;
  functionInvocations: number;
  functionErrors: number;
  coldStarts: number;
  databaseCalls: number;
  p50Ms: number | null;
  p95Ms: number | null;
  p99Ms: number | null;
  functionP50Ms: number | null;
  functionP95Ms: number | null;
  functionP99Ms: number | null;
}

export type Point = Counts & { at: string };

interface Window {
  /** Epoch seconds: the first bucket's start, and the range's end (exclusive). */
  start: number;
  end: number;
  step: Step;
  seconds: number;
}

function instant(text: string, name: string): number {
  const time = Date.parse(text);
  if (!/^\d{4}-\d\d-\d\dT/.test(text) || Number.isNaN(time))
    throw invalid(`\`${name}\` is an RFC 3339 time, such as 2026-11-26T12:00:00Z`);
  return Math.floor(time / 1000);
}

/** The step a range is read at when none is asked for: at most a few hundred points. */
function defaultStep(seconds: number): Step {
  if (seconds <= 6 * HOUR) return 'minute';
  if (seconds <= 14 * DAY) return 'hour';
  return 'day';
}

/** The range asked for (the last 24 hours by default), aligned to its step. */
function windowOf(deps: Pick<Deps, 'now'>, range: AnalyticsRange): Window {
  const now = Math.floor(deps.now().getTime() / 1000);
  const to = range.to === undefined ? now : instant(range.to, 'to');
  const from = range.from === undefined ? to - DAY : instant(range.from, 'from');
  if (from >= to) throw invalid('`from` must be before `to`');
  const step = range.step ?? defaultStep(to - from);
  const seconds = STEP_SECONDS[step];
  const start = Math.floor(from / seconds) * seconds;
  // The bucket holding `to` is the last one, whole.
  const end = Math.floor((to - 1) / seconds) * seconds + seconds;
  const points = (end - start) / seconds;
  if (points > MAX_POINTS)
    throw invalid(`that range has ${points} ${step}s; ask for at most ${MAX_POINTS} points (a coarser step)`, {
      points,
      maxPoints: MAX_POINTS,
    });
  return { start, end, step, seconds };
}

function countsOf(tally: Tally): Counts {
  return {
    requests: tally.requests,
    status: { '2xx': tally.status[0], '3xx': tally.status[1], '4xx': tally.status[2], '5xx': tally.status[3] },
    bytesOut: tally.bytesOut,
    functionInvocations: tally.functionInvocations,
    functionErrors: tally.functionErrors,
    coldStarts: tally.coldStarts,
    databaseCalls: tally.databaseCalls,
    p50Ms: quantileMs(tally.latency, 0.5),
    p95Ms: quantileMs(tally.latency, 0.95),
    p99Ms: quantileMs(tally.latency, 0.99),
    functionP50Ms: quantileMs(tally.functionLatency, 0.5),
    functionP95Ms: quantileMs(tally.functionLatency, 0.95),
    functionP99Ms: quantileMs(tally.functionLatency, 0.99),
  };
}

/** Totals and a dense series (every step of the window, empty ones as zeros) of some tallies. */
function summarise(tallies: PeriodTally[], window: Window) {
  const total = newTally();
  const buckets = new Map<number, Tally>();
  for (const { at, tally } of tallies) {
    addTally(total, tally);
    const bucket = Math.floor(at / window.seconds) * window.seconds;
    let into = buckets.get(bucket);
    if (!into) {
      into = newTally();
      buckets.set(bucket, into);
    }
    addTally(into, tally);
  }
  const series: Point[] = [];
  for (let at = window.start; at < window.end; at += window.seconds)
    series.push({ at: new Date(at * 1000).toISOString(), ...countsOf(buckets.get(at) ?? newTally()) });
  return { total, totals: countsOf(total), series };
}

/** The tallies of the window, at the coarsest resolution its step allows (hours for whole hours). */
const readWindow = (deps: Deps, siteIds: string[], window: Window) =>
  readTallies(deps.db, siteIds, window.start, window.end, window.seconds, Math.floor(deps.now().getTime() / 1000));

const rangeOf = (window: Window) => ({
  from: new Date(window.start * 1000).toISOString(),
  to: new Date(window.end * 1000).toISOString(),
  step: window.step,
});

/** A site's analytics, as GET /v0/sites/:siteId/analytics answers. */
export interface AnalyticsResult {
  from: string;
  to: string;
  step: Step;
  totals: Counts;
  series: Point[];
  topPaths: Array<{ path: string; requests: number }>;
  topReferrers: Array<{ host: string; requests: number }>;
}

export async function siteAnalytics(
  deps: Deps,
  actor: Actor,
  siteId: string,
  range: AnalyticsRange,
): Promise<AnalyticsResult> {
  await requireSite(deps, actor, siteId);
  const window = windowOf(deps, range);
  await deps.analytics.flush();
  const { total, totals, series } = summarise(await readWindow(deps, [siteId], window), window);
  return {
    ...rangeOf(window),
    totals,
    series,
    topPaths: top(total.paths, TOP).map(([path, requests]) => ({ path, requests })),
    topReferrers: top(total.referrers, TOP).map(([host, requests]) => ({ host, requests })),
  };
}

/** Every site of the account: the account's totals and series, and each site's (busiest first). */
export async function accountAnalytics(deps: Deps, actor: Actor, accountId: string, range: AnalyticsRange) {
  if (accountId !== actor.accountId) throw notFound('account');
  const window = windowOf(deps, range);
  const sites: Array<{ id: string; name: string; subdomain: string }> = await deps
    .db('sites')
    .where({ account_id: accountId })
    .orderBy('name')
    .select('id', 'name', 'subdomain');
  await deps.analytics.flush();
  const tallies = await readWindow(
    deps,
    sites.map((site) => site.id),
    window,
  );
  const bySite = new Map<string, PeriodTally[]>();
  for (const tally of tallies) {
    const list = bySite.get(tally.siteId);
    if (list) list.push(tally);
    else bySite.set(tally.siteId, [tally]);
  }
  const { totals, series } = summarise(tallies, window);
  return {
    ...rangeOf(window),
    totals,
    series,
    sites: sites
      .map((site) => {
        const summary = summarise(bySite.get(site.id) ?? [], window);
        return { site, totals: summary.totals, series: summary.series };
      })
      .sort((a, b) => b.totals.requests - a.totals.requests),
  };
}
