// Text for a person from an API answer: a list as a table of its plain fields, a query's rows as a
// table, anything else as `field: value` lines. --json prints the answer itself.

type Row = Record<string, unknown>;

const isPlain = (value: unknown) => value === null || ['string', 'number', 'boolean'].includes(typeof value);

function table(rows: Row[]): string {
  if (rows.length === 0) return '(none)';
  const columns = Object.keys(rows[0]!)
    .filter((key) => rows.every((row) => isPlain(row[key])))
    .slice(0, 8);
  const cells = [columns, ...rows.map((row) => columns.map((column) => String(row[column] ?? '')))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i]!.length)));
  return cells
    .map((line) =>
      line
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function lines(object: Row): string {
  return Object.entries(object)
    .map(([key, value]) => `${key}: ${isPlain(value) ? String(value) : JSON.stringify(value)}`)
    .join('\n');
}

export function formatAnswer(answer: unknown): string {
  if (answer === null || typeof answer !== 'object') return String(answer ?? '');
  const object = answer as Row;
  // The query envelope: the rows, or why the statement failed.
  if (Array.isArray(object.result) && typeof object.success === 'boolean') {
    if (!object.success)
      return (object.errors as Array<{ code: string; message: string }>)
        .map((e) => `${e.message} (${e.code})`)
        .join('\n');
    const [first] = object.result as Array<{ results: Row[]; meta: Row }>;
    return `${table(first!.results)}\n(${String(first!.meta.changes)} changed, ${String(first!.meta.duration)} ms)`;
  }
  const lists = Object.entries(object).filter(([, value]) => Array.isArray(value));
  if (lists.length === 1) return table(lists[0]![1] as Row[]);
  const [only, ...rest] = Object.values(object);
  if (rest.length === 0 && only !== null && typeof only === 'object') return lines(only as Row);
  return lines(object);
}
