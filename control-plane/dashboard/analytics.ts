// A site's traffic on its overview: the figures of a range (1 hour to 30 days), charts of requests by
// status class, latency percentiles and function errors (uPlot, bundled with the dashboard), each
// chart's numbers as a table beside it, and the top paths and referrer hosts. Series are told apart
// by their labels and line patterns as well as their hues, so the charts read without colour.
import uPlot from 'uplot';
import { get } from './api.ts';
import { type Child, fill, formatBytes, h, messageOf, table } from './dom.ts';
import type { AnalyticsCounts, SiteAnalytics } from './types.ts';

interface Range {
  key: string;
  label: string;
  hours: number;
  step: 'minute' | 'hour' | 'day';
}

export const RANGES: Range[] = [
  { key: '1h', label: '1 hour', hours: 1, step: 'minute' },
  { key: '24h', label: '24 hours', hours: 24, step: 'hour' },
  { key: '7d', label: '7 days', hours: 7 * 24, step: 'hour' },
  { key: '30d', label: '30 days', hours: 30 * 24, step: 'day' },
];

interface Line {
  label: string;
  value: (point: AnalyticsCounts) => number | null;
  stroke: string;
  /** Dash pattern: how the line is told apart without its colour. */
  dash: number[];
}

interface Chart {
  title: string;
  unit: string;
  lines: Line[];
}

const CHARTS: Chart[] = [
  {
    title: 'Requests by status',
    unit: 'requests',
    lines: [
      { label: '2xx', value: (p) => p.status['2xx'], stroke: '#1a7f37', dash: [] },
      { label: '3xx', value: (p) => p.status['3xx'], stroke: '#1f5fbf', dash: [2, 3] },
      { label: '4xx', value: (p) => p.status['4xx'], stroke: '#9a6700', dash: [8, 4] },
      { label: '5xx', value: (p) => p.status['5xx'], stroke: '#b42318', dash: [12, 3, 2, 3] },
    ],
  },
  {
    title: 'Latency',
    unit: 'ms',
    lines: [
      { label: 'p50', value: (p) => p.p50Ms, stroke: '#1f5fbf', dash: [] },
      { label: 'p95', value: (p) => p.p95Ms, stroke: '#9a6700', dash: [8, 4] },
      { label: 'p99', value: (p) => p.p99Ms, stroke: '#b42318', dash: [2, 3] },
    ],
  },
  {
    title: 'Function calls',
    unit: 'calls',
    lines: [
      { label: 'calls', value: (p) => p.functionInvocations, stroke: '#1f5fbf', dash: [] },
      { label: 'errors', value: (p) => p.functionErrors, stroke: '#b42318', dash: [8, 4] },
    ],
  },
];

const count = (n: number): string => n.toLocaleString();
const ms = (n: number | null): string => (n === null ? '–' : `${n} ms`);

/** A moment of the series as its step reads: the hour for minutes and hours, the date for days. */
function label(at: string, step: Range['step']): string {
  const date = new Date(at);
  return step === 'day'
    ? date.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })
    : date.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

/** The site's traffic section, loading the 24 hours first; the range buttons reload it. */
export function trafficSection(siteId: string): HTMLElement {
  const body = h('div', { class: 'traffic-body' }, h('p', { class: 'loading' }, 'Loading traffic…'));
  const buttons = RANGES.map((range) =>
    h(
      'button',
      {
        type: 'button',
        'data-range': range.key,
        'aria-pressed': range.key === '24h' ? 'true' : 'false',
        onclick: () => void show(range),
      },
      range.label,
    ),
  );
  let charts: uPlot[] = [];
  const show = async (range: Range) => {
    for (const button of buttons)
      button.setAttribute('aria-pressed', button.dataset.range === range.key ? 'true' : 'false');
    try {
      const to = new Date();
      const from = new Date(to.getTime() - range.hours * 3600_000);
      const data = await get<SiteAnalytics>(`/v0/sites/${encodeURIComponent(siteId)}/analytics`, {
        from: from.toISOString(),
        to: to.toISOString(),
        step: range.step,
      });
      for (const chart of charts) chart.destroy();
      charts = [];
      fill(body, ...render(data, range, charts));
      section.dataset.loaded = range.key;
    } catch (err) {
      fill(body, h('p', { class: 'status error', role: 'alert' }, `Traffic could not be loaded: ${messageOf(err)}`));
    }
  };
  const section = h(
    'section',
    { class: 'card traffic', 'aria-label': 'Traffic' },
    h(
      'div',
      { class: 'traffic-head' },
      h('h2', null, 'Traffic'),
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'Range' }, buttons),
    ),
    body,
  );
  void show(RANGES[1]!);
  return section;
}

function render(data: SiteAnalytics, range: Range, charts: uPlot[]): Child[] {
  const { totals } = data;
  return [
    h(
      'dl',
      { class: 'tiles' },
      tile('Requests', count(totals.requests)),
      tile('Client errors (4xx)', count(totals.status['4xx'])),
      tile('Server errors (5xx)', count(totals.status['5xx'])),
      tile('Function errors', `${count(totals.functionErrors)} of ${count(totals.functionInvocations)}`),
      tile('Latency p50 / p95', `${ms(totals.p50Ms)} / ${ms(totals.p95Ms)}`),
      tile('Data sent', formatBytes(totals.bytesOut)),
      tile('Cold starts', count(totals.coldStarts)),
      tile('Database calls', count(totals.databaseCalls)),
    ),
    totals.requests === 0 ? h('p', { class: 'empty' }, `No requests in the last ${range.label}.`) : null,
    CHARTS.map((chart) => chartFigure(chart, data, range, charts)),
    h(
      'div',
      { class: 'tops' },
      h(
        'div',
        null,
        h('h3', null, 'Top paths'),
        table(
          'Top paths',
          [
            { label: 'Path', cell: (p) => h('span', { class: 'mono' }, p.path) },
            { label: 'Requests', cell: (p) => count(p.requests), class: 'num' },
          ],
          data.topPaths,
          'No requests yet.',
        ),
      ),
      h(
        'div',
        null,
        h('h3', null, 'Top referrers'),
        table(
          'Top referrers',
          [
            { label: 'Host', cell: (r) => r.host },
            { label: 'Requests', cell: (r) => count(r.requests), class: 'num' },
          ],
          data.topReferrers,
          'No visits from other sites yet.',
        ),
      ),
    ),
  ];
}

const tile = (name: string, value: string): HTMLElement[] => [
  h('div', { class: 'tile' }, h('dt', null, name), h('dd', null, value)),
];

/** A chart and, under it, the same numbers as a table (for screen readers, and anyone who wants them). */
function chartFigure(chart: Chart, data: SiteAnalytics, range: Range, charts: uPlot[]): HTMLElement {
  const xs = data.series.map((point) => Date.parse(point.at) / 1000);
  const ys = chart.lines.map((line) => data.series.map((point) => line.value(point)));
  const plot = h('div', { class: 'chart', role: 'img', 'aria-label': `${chart.title}, by ${range.step}` });
  const figure = h(
    'figure',
    { class: 'chart-figure', 'data-chart': chart.title },
    h('figcaption', null, chart.title, h('span', { class: 'hint' }, ` (${chart.unit} per ${range.step})`)),
    plot,
    h(
      'details',
      null,
      h('summary', null, 'Show as a table'),
      table(
        chart.title,
        [
          { label: 'Time', cell: (i: number) => label(data.series[i]!.at, range.step) },
          ...chart.lines.map((line, n) => ({
            label: line.label,
            cell: (i: number) => {
              const value = ys[n]![i];
              return value === null || value === undefined ? '–' : count(value);
            },
            class: 'num',
          })),
        ],
        data.series.map((_, i) => i),
      ),
    ),
  );
  // Drawn once the figure is in the page, at its width.
  requestAnimationFrame(() => {
    if (!plot.isConnected) return;
    const options: uPlot.Options = {
      width: Math.max(280, plot.clientWidth),
      height: 180,
      series: [
        { label: 'Time' },
        ...chart.lines.map((line) => ({
          label: line.label,
          stroke: line.stroke,
          dash: line.dash,
          width: 2,
          spanGaps: false,
          points: { show: xs.length <= 60 },
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : count(v)),
        })),
      ],
      axes: [{}, { size: 56 }],
      scales: { x: { time: true } },
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
    };
    charts.push(new uPlot(options, [xs, ...ys] as uPlot.AlignedData, plot));
  });
  return figure;
}
