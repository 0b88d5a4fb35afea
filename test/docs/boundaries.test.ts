// docs/architecture.md's boundaries cannot drift from the code: its table puts every part of Berth (a
// folder, or a file of control-plane/ by itself) on a row, and each part imports only parts of the rows
// below its own. The one import that runs up is named in the doc; the dialects stay inside db/.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SOURCE_DIRS = ['control-plane', 'runtime-host', 'deno-shim', 'storage'];
const doc = fs.readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');
const section = doc.slice(doc.indexOf('\n## Boundaries\n'), doc.indexOf('\n## ', doc.indexOf('\n## Boundaries\n') + 1));

/** The rows of the boundaries table, top first: the parts each names. */
const rows: string[][] = section
  .split('\n')
  .filter((line) => /^\| \d+ \|/.test(line))
  .map((line) => [...line.split('|')[2]!.matchAll(/`([^`]+)`/g)].map(([, name]) => name!));
/** `from -> to` of the imports the doc names as running up. */
const upward = new Set(
  [...section.matchAll(/^- `([^`]+)` imports `([^`]+)`/gm)].map(([, from, to]) => `${from} -> ${to}`),
);

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'templates' ? [] : sourceFiles(rel);
    return /\.(ts|js)$/.test(entry.name) ? [rel] : [];
  });
}

/** The part a file belongs to: the longest folder or file the table names that holds it. */
function partOf(file: string): string | undefined {
  let best: string | undefined;
  for (const part of rows.flat())
    if ((part === file || (part.endsWith('/') && file.startsWith(part))) && part.length > (best?.length ?? 0))
      best = part;
  return best;
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** Every import of every source file: relative ones resolved to a path of the tree, packages as named. */
const imports = SOURCE_DIRS.flatMap(sourceFiles).flatMap((file) =>
  [...fs.readFileSync(path.join(ROOT, file), 'utf8').matchAll(IMPORT)].map(([, from, dynamic]) => {
    const spec = (from ?? dynamic)!;
    return { file, spec, target: spec.startsWith('.') ? path.posix.join(path.posix.dirname(file), spec) : null };
  }),
);

test('the table puts every source file on a row, and names each part once', (t) => {
  t.true(rows.length > 5, 'docs/architecture.md has a "## Boundaries" table');
  const named = rows.flat();
  t.deepEqual(
    named.filter((part, i) => named.indexOf(part) !== i),
    [],
  );
  t.deepEqual(
    SOURCE_DIRS.flatMap(sourceFiles).filter((file) => partOf(file) === undefined),
    [],
    'put these on a row of the boundaries table',
  );
  t.deepEqual(
    named.filter((part) => !fs.existsSync(path.join(ROOT, part))),
    [],
    'these parts no longer exist',
  );
});

test('each part imports only the parts of the rows below its own', (t) => {
  const row = (part: string) => rows.findIndex((parts) => parts.includes(part));
  const wrong = new Set<string>();
  const usedUpward = new Set<string>();
  for (const { file, target } of imports) {
    if (!target) continue;
    const from = partOf(file)!;
    const to = partOf(target);
    if (!to || to === from) continue;
    if (upward.has(`${file} -> ${target}`)) {
      usedUpward.add(`${file} -> ${target}`);
      continue;
    }
    if (row(to) <= row(from))
      wrong.add(
        `${file} imports ${target} (${from} is on row ${rows.length - row(from)}, ${to} on row ${rows.length - row(to)})`,
      );
  }
  t.deepEqual([...wrong], [], 'an import runs up or across: move the code, or the part to another row');
  t.deepEqual(
    [...upward].filter((arrow) => !usedUpward.has(arrow)),
    [],
    'the doc names an upward import the code no longer has',
  );
  t.true(upward.size <= 1, 'at most one import runs up');
});

test('no source files import each other, however far round', (t) => {
  const next = new Map<string, string[]>();
  for (const { file, target } of imports) {
    if (!target) continue;
    next.set(file, [...(next.get(file) ?? []), target]);
  }
  // Depth-first: a file met again while it is still on the path closes a loop.
  const loops: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (file: string) => {
    if (done.has(file)) return;
    const at = path.indexOf(file);
    if (at >= 0) {
      loops.push([...path.slice(at), file].join(' -> '));
      return;
    }
    path.push(file);
    for (const to of next.get(file) ?? []) visit(to);
    path.pop();
    done.add(file);
  };
  for (const file of next.keys()) visit(file);
  t.deepEqual(loops, [], 'a loop of imports: move what both need below both');
});

test('the dashboard, the browser’s code, imports only the schemas and what the API’s clients share, and no part imports it', (t) => {
  const dashboard = 'control-plane/dashboard/';
  const allowed = (target: string) =>
    target.startsWith(dashboard) ||
    target === 'control-plane/schemas.ts' ||
    target.startsWith('control-plane/api-clients/');
  t.deepEqual(
    imports
      .filter(
        ({ file, target }) => target && (file.startsWith(dashboard) ? !allowed(target) : target.startsWith(dashboard)),
      )
      .map(({ file, target }) => `${file} imports ${target}`),
    [],
  );
});

test('only control-plane/db/ knows the metadata dialects', (t) => {
  const outside = imports.filter(
    ({ file, spec, target }) =>
      !file.startsWith('control-plane/db/') &&
      (spec === 'pg' || spec.startsWith('pg-') || /^control-plane\/db\/(sqlite|postgres)\//.test(target ?? '')),
  );
  t.deepEqual(
    outside.map(({ file, spec }) => `${file}: ${spec}`),
    [],
  );
});
