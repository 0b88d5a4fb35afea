// Temp files a previous process left when it was killed mid-write: every durable file Berth writes goes
// first to a name ending in `.tmp` beside its final place (an export's dump, the master key, the
// server's pid, a function's module, a site database's copies), then is renamed. A start sweeps them
// after the previous server's processes are gone (leftover-processes.ts), so none is still being
// written. The blob directory's driver sweeps its own temp folder (drivers/local-driver.ts). SQLite's
// journals never end in `.tmp`: a hot journal is how SQLite rolls back an interrupted write, and stays.
import fs from 'node:fs';
import path from 'node:path';

function foldersOf(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => path.join(dir, e.name));
  } catch {
    return [];
  }
}

/** Removes what ends in `.tmp` in every folder of the data dir that can hold one; returns how many. */
export function sweepTempFiles(dataDir: string): number {
  const versions = foldersOf(path.join(dataDir, 'runtime', 'functions')).flatMap(foldersOf); // functions/<function>/<version>
  const folders = [
    dataDir,
    path.join(dataDir, 'exports'),
    ...versions,
    path.join(dataDir, 'sites'),
    ...foldersOf(path.join(dataDir, 'sites')),
  ];
  let removed = 0;
  for (const folder of folders) {
    let names: string[];
    try {
      names = fs.readdirSync(folder);
    } catch {
      continue; // Not made yet.
    }
    for (const name of names.filter((n) => n.endsWith('.tmp'))) {
      fs.rmSync(path.join(folder, name), { recursive: true, force: true });
      removed++;
    }
  }
  return removed;
}
