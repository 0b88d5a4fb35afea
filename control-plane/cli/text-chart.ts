// A series as a terminal draws it: one row of eighth-blocks, scaled to its largest value, with the
// first and last moments under it. Characters only, so it reads the same without colour.

const BLOCKS = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/** Columns a chart takes at most; a longer series is summed into this many. */
export const CHART_WIDTH = 72;

/** `values` summed into at most `width` columns of consecutive values. */
export function fold(values: number[], width = CHART_WIDTH): number[] {
  if (values.length <= width) return values;
  const per = Math.ceil(values.length / width);
  const columns: number[] = [];
  for (let i = 0; i < values.length; i += per) columns.push(values.slice(i, i + per).reduce((a, b) => a + b, 0));
  return columns;
}

/** A row of blocks: empty columns as spaces, the largest value as a full block. */
export function sparkline(values: number[]): string {
  const max = Math.max(0, ...values);
  return values
    .map((value) => (value <= 0 || max === 0 ? ' ' : BLOCKS[Math.min(7, Math.floor((value / max) * 7.999))]!))
    .join('');
}

/** The chart with a title line naming its largest column, and a line of its first and last labels. */
export function textChart(title: string, values: number[], firstLabel: string, lastLabel: string): string {
  const columns = fold(values);
  const line = sparkline(columns);
  const gap = Math.max(1, line.length - firstLabel.length - lastLabel.length);
  return [
    `${title} (tallest: ${Math.max(0, ...columns).toLocaleString('en')})`,
    `│${line}│`,
    ` ${firstLabel}${' '.repeat(gap)}${lastLabel}`,
  ].join('\n');
}
