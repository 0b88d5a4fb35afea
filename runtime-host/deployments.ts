// Generated files of deployed function versions, under <runtime dir>/functions/<functionId>/<versionId>/.
// The entry imports the hardening shim first, then the function, then the shim's main loop, so the
// function's top level already runs inside the hardened, log-capturing environment.
import fs from 'node:fs';
import path from 'node:path';

const SHIM_DIR = path.resolve(import.meta.dirname, '../deno-shim');

export interface DeploymentFiles {
  entryPath: string;
}

const versionDir = (runtimeDir: string, functionId: string, versionId: string) =>
  path.join(runtimeDir, 'functions', functionId, versionId);

function writeAtomically(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

/** Writes (or rewrites) a version's entry and source; the runtime dir is disposable. */
export function writeDeployment(runtimeDir: string, functionId: string, versionId: string, source: string): DeploymentFiles {
  const dir = versionDir(runtimeDir, functionId, versionId);
  fs.mkdirSync(dir, { recursive: true });
  writeAtomically(path.join(dir, 'function.ts'), source);
  const entryPath = path.join(dir, 'entry.ts');
  writeAtomically(
    entryPath,
    [
      `import ${JSON.stringify(path.join(SHIM_DIR, 'harden.ts'))};`,
      `import * as fn from './function.ts';`,
      `import { run } from ${JSON.stringify(path.join(SHIM_DIR, 'shim.ts'))};`,
      `await run(fn);`,
      '',
    ].join('\n'),
  );
  return { entryPath };
}

export function deploymentExists(runtimeDir: string, functionId: string, versionId: string): string | null {
  const entryPath = path.join(versionDir(runtimeDir, functionId, versionId), 'entry.ts');
  return fs.existsSync(entryPath) ? entryPath : null;
}

/** Removes a function's generated files, all versions or all but `keepVersionId`. */
export function removeDeployments(runtimeDir: string, functionId: string, keepVersionId?: string): void {
  const dir = path.join(runtimeDir, 'functions', functionId);
  if (!fs.existsSync(dir)) return;
  for (const version of fs.readdirSync(dir)) {
    if (version !== keepVersionId) fs.rmSync(path.join(dir, version), { recursive: true, force: true });
  }
}
