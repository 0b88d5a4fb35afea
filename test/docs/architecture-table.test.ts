// docs/architecture.md's tables of the tree cannot drift from it: every source file of Berth is named
// there (by itself, or by a row for the folder it sits in), every path a row names exists, and each
// table lists its rows in order of path.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SOURCE_DIRS = ['control-plane', 'runtime-host', 'deno-shim', 'storage'];
const doc = fs.readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');

/** The paths each row's first cell names, in order; a bare name is in the folder of the path before it. */
function tables(): string[][][] {
  const found: string[][][] = [];
  let rows: string[][] | null = null;
  for (const line of doc.split('\n')) {
    if (!line.startsWith('| `')) {
      if (rows?.length) found.push(rows);
      rows = line.startsWith('|') ? (rows ?? []) : null;
      continue;
    }
    rows ??= [];
    const cell = line.split('|')[1]!;
    const named: string[] = [];
    let folder = '';
    for (const [, token] of cell.matchAll(/`([^`]+)`/g)) {
      const full = token!.includes('/') ? token! : folder + token!;
      folder = full.endsWith('/') ? full : `${path.posix.dirname(full)}/`;
      named.push(full);
    }
    rows.push(named);
  }
  if (rows?.length) found.push(rows);
  return found;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(rel);
    return /\.(ts|js)$/.test(entry.name) ? [rel] : [];
  });
}

const named = tables().flat(2);

test('every source file is named in docs/architecture.md, by itself or by its folder', (t) => {
  const listed = new Set(named);
  const missing = SOURCE_DIRS.flatMap(sourceFiles).filter(
    (file) => !listed.has(file) && !listed.has(`${path.posix.dirname(file)}/`),
  );
  t.deepEqual(missing, [], 'add a row (or name the file in its neighbour’s row) to docs/architecture.md');
});

test('every path docs/architecture.md’s tables name exists', (t) => {
  const gone = named.filter((name) => !fs.existsSync(path.join(ROOT, name)));
  t.deepEqual(gone, [], 'these rows name files that no longer exist');
});

test('each table of docs/architecture.md lists its rows in order of path', (t) => {
  for (const rows of tables()) {
    const firsts = rows.map((row) => row[0] ?? '');
    t.deepEqual(firsts, [...firsts].sort(), `the table that starts with ${firsts[0]}`);
  }
});
