// The generated files of function versions, under <runtime dir>/functions/<functionId>/<versionId>/,
// and the entry programs workers run. An entry reaches Deno on stdin, so no host path or channel
// detail is in the worker's arguments; it opens the channel before the function's module is even
// evaluated, and the function's top level then runs inside the hardened, log-capturing environment.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ChannelParams } from './protocol.ts';

const SHIM_URL = pathToFileURL(path.resolve(import.meta.dirname, '../deno-shim/shim.ts')).href;

export interface VersionFiles {
  /** The function's module. */
  modulePath: string;
}

const versionDir = (runtimeDir: string, functionId: string, versionId: string) =>
  path.join(runtimeDir, 'functions', functionId, versionId);

function writeAtomically(file: string, text: string | Buffer): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

/** A v0 function's module is its TypeScript source; a built one's is JavaScript. */
export type ModuleKind = 'ts' | 'js';

/** Writes (or rewrites) a version's module; the runtime dir is disposable. */
export function writeVersionFiles(
  runtimeDir: string,
  functionId: string,
  versionId: string,
  source: string | Buffer,
  kind: ModuleKind = 'ts',
): VersionFiles {
  const dir = versionDir(runtimeDir, functionId, versionId);
  fs.mkdirSync(dir, { recursive: true });
  const modulePath = path.join(dir, `function.${kind}`);
  writeAtomically(modulePath, source);
  return { modulePath };
}

/** The module of a version whose files are written, or null. */
export function writtenModule(
  runtimeDir: string,
  functionId: string,
  versionId: string,
  kind: ModuleKind = 'ts',
): string | null {
  const modulePath = path.join(versionDir(runtimeDir, functionId, versionId), `function.${kind}`);
  return fs.existsSync(modulePath) ? modulePath : null;
}

/** The versions of a function with generated files, all of them or all but `keepVersionId`. */
export function writtenVersions(runtimeDir: string, functionId: string, keepVersionId?: string): string[] {
  const dir = path.join(runtimeDir, 'functions', functionId);
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((version) => version !== keepVersionId);
}

/** Removes the generated files of these versions of a function. */
export function removeVersions(runtimeDir: string, functionId: string, versions: string[]): void {
  for (const version of versions)
    fs.rmSync(path.join(runtimeDir, 'functions', functionId, version), { recursive: true, force: true });
}

/** Removes the generated files of every function whose id `matches`. */
export function removeFunctionFilesWhere(runtimeDir: string, matches: (functionId: string) => boolean): void {
  const dir = path.join(runtimeDir, 'functions');
  if (!fs.existsSync(dir)) return;
  for (const functionId of fs.readdirSync(dir)) {
    if (matches(functionId)) fs.rmSync(path.join(dir, functionId), { recursive: true, force: true });
  }
}

/**
 * The program a worker runs (`deno run -`). The function is imported with a string literal, so Deno
 * loads it as part of the program's module graph and needs no read permission for it.
 */
export function entryProgram(modulePath: string, params: Omit<ChannelParams, 'functionUrl'>): string {
  const functionUrl = pathToFileURL(modulePath).href;
  const channel: ChannelParams = { ...params, functionUrl };
  return [
    `import { connect, run } from ${JSON.stringify(SHIM_URL)};`,
    `const channel = await connect(${JSON.stringify(channel)});`,
    `await run(channel, () => import(${JSON.stringify(functionUrl)}));`,
    '',
  ].join('\n');
}

/**
 * The program a spare runs: the shim, loaded and connected, then waiting for the one function the
 * host will give it over the channel (see standby in deno-shim/shim.ts). It names no function or site.
 */
export function spareProgram(socketPath: string): string {
  return [
    `import { standby } from ${JSON.stringify(SHIM_URL)};`,
    `await standby(${JSON.stringify(socketPath)});`,
    '',
  ].join('\n');
}
