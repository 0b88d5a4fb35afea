// Serves the ctx calls of function workers. Every call arrives on a worker's own channel, and the
// function version bound to that channel, not anything the function sends, decides the site it acts on.
// New namespaces are added by registering their methods here.
import { Readable } from 'node:stream';
import { BerthError, storageUnavailable } from '../errors.ts';
import { StorageUnavailableError } from '../../storage/blob-driver.ts';
import { isMetadataUnavailable, logJobFailure } from '../db/errors.ts';
import type { FunctionVersion } from '../../runtime-host/runtime.ts';
import { type CtxCall, CtxErrorCode, type CtxResult } from '../../runtime-host/protocol.ts';
import type { CtxMethod } from '../../runtime-host/context-contract.ts';
import type { Actor, Deps } from '../deps.ts';
import { findCurrentFile } from './file-rows.ts';
import { writeFile } from './files.ts';
import { normalizeFilePath, normalizePrefix } from './paths.ts';
import { mayReadSecrets } from './functions.ts';
import { readSecretForSite } from './secrets.ts';
import { createMessage } from './llm.ts';
import { hasDatabase, runForFunction } from './databases.ts';
import {
  type DbMethod,
  FunctionCallError,
  callStatements,
  callValue,
  functionFailure,
} from '../site-databases/function-calls.ts';
import type { ChangeListener } from '../db/changes.ts';
import type { SiteRow } from './site-rows.ts';

/** A ctx call failing in a way the function should see, with a stable code and maybe a status. */
class CtxError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

interface CallScope {
  deps: Deps;
  functionVersion: FunctionVersion;
  requestId: string | null;
  site: SiteRow;
  /** Writes are made on behalf of the site's account, attributed to the function. */
  actor: Actor;
}

type Method = (scope: CallScope, args: unknown[]) => Promise<unknown>;

const MAX_READ_BYTES = 10 * 1024 * 1024;

function stringArg(args: unknown[], index: number, name: string): string {
  const value = args[index];
  if (typeof value !== 'string') throw new CtxError(CtxErrorCode.InvalidArgument, `${name} must be a string`);
  return value;
}

/** "x.json", "data/x.json" and "/data/x.json" all name data/x.json; a prefix may end with "/". */
function dataPath(raw: string, kind: 'file' | 'prefix' = 'file'): string {
  const trimmed = raw.replace(/^\/+/, '');
  const inside = trimmed === 'data' ? '' : trimmed.startsWith('data/') ? trimmed.slice(5) : trimmed;
  if (kind === 'prefix' && inside === '') return 'data/';
  try {
    return `data/${kind === 'file' ? normalizeFilePath(inside) : normalizePrefix(inside)}`;
  } catch (err) {
    throw new CtxError('DATA_INVALID_PATH', `invalid data path "${raw}": ${(err as Error).message}`);
  }
}

/** A data file's text and the version it is, or null when there is none. */
async function readCurrent(scope: CallScope, raw: string): Promise<{ text: string; versionId: string } | null> {
  const path = dataPath(raw);
  const found = await findCurrentFile(scope.deps, scope.site.bucket_id, path);
  if (!found) return null;
  if (found.file.bytes > MAX_READ_BYTES)
    throw new CtxError('DATA_TOO_LARGE', `${path} is larger than ${MAX_READ_BYTES} bytes`);
  const text = (await scope.deps.blobs.read(found.sha256)).toString('utf8');
  return { text, versionId: found.file.currentVersionId };
}

const readText = async (scope: CallScope, raw: string): Promise<string | null> =>
  (await readCurrent(scope, raw))?.text ?? null;

function parseJson(text: string, path: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new CtxError('DATA_INVALID_JSON', `${dataPath(path)} does not hold valid JSON`);
  }
}

function serialize(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new CtxError(CtxErrorCode.InvalidArgument, 'value must be JSON-serializable');
  return text;
}

/** Writes a new version; with `ifMatch`, only while that version (null: none) is the current one. */
async function write(scope: CallScope, raw: string, text: string, contentType: string, ifMatch?: string | null) {
  const bytes = Buffer.from(text, 'utf8');
  try {
    const result = await writeFile(scope.deps, scope.actor, scope.site.bucket_id, dataPath(raw), {
      body: Readable.from([bytes]),
      contentType,
      declaredBytes: bytes.length,
      ifMatch,
    });
    return { path: result.path, versionId: result.versionId, bytes: result.bytes };
  } catch (err) {
    // The account's quota keeps the code and status it has everywhere, so an uncaught one answers 413.
    if (err instanceof BerthError && err.code === 'quota_exceeded') throw new CtxError(err.code, err.message, 413);
    throw err;
  }
}

/**
 * Runs a ctx.db call on the site's database, or on the branch of it the worker was started for (a
 * preview's); provider diagnostics go to the site's logs, not the function.
 */
async function db(scope: CallScope, method: DbMethod, args: unknown[]) {
  try {
    const statements = callStatements(method, args);
    return callValue(method, await runForFunction(scope.deps, scope.site.id, statements, scope.functionVersion.branch));
  } catch (err) {
    if (!(err instanceof FunctionCallError)) throw err;
    if (err.diagnostic) {
      scope.deps.functionLogs.add(scope.site.id, scope.functionVersion.path, {
        requestId: scope.requestId,
        level: 'error',
        message: `ctx.db: ${err.diagnostic}`,
      });
    }
    throw new CtxError(err.code, err.message);
  }
}

/** How many times an append reads its file and writes it back before it leaves the file to other writers. */
const APPEND_ATTEMPTS = 20;

/**
 * Appends a line as a new version of the whole file, committed only if the version it read is still the
 * current one: when another writer got in first (a function on another node, the file API), it reads
 * the file again and retries at once. Each lost attempt is another writer's commit, so some writer
 * always progresses.
 */
async function appendLine(scope: CallScope, raw: string, line: string) {
  for (let attempt = 1; ; attempt++) {
    const current = await readCurrent(scope, raw);
    const existing = current?.text ?? '';
    const separator = existing === '' || existing.endsWith('\n') ? '' : '\n';
    try {
      return await write(
        scope,
        raw,
        `${existing}${separator}${line}\n`,
        'application/jsonl',
        current?.versionId ?? null,
      );
    } catch (err) {
      if (!(err instanceof BerthError && err.code === 'version_conflict')) throw err;
      if (attempt === APPEND_ATTEMPTS) {
        throw new CtxError(
          err.code,
          `${dataPath(raw)} changed ${APPEND_ATTEMPTS} times while this line was being appended; nothing was appended, try again`,
          409,
        );
      }
    }
  }
}

/**
 * The ctx methods, exactly those of the runtime contract, with the per-file queue that keeps this
 * server's appends to one file from competing with each other.
 */
function createMethods(): Record<CtxMethod, Method> {
  const appendLocks = new Map<string, Promise<unknown>>();
  return {
    'data.readText': (scope, args) => readText(scope, stringArg(args, 0, 'path')),
    'data.readJson': async (scope, args) => {
      const path = stringArg(args, 0, 'path');
      const text = await readText(scope, path);
      return text === null ? null : parseJson(text, path);
    },
    'data.readJsonl': async (scope, args) => {
      const path = stringArg(args, 0, 'path');
      const text = await readText(scope, path);
      if (text === null) return [];
      return text
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => parseJson(line, path));
    },
    'data.writeText': (scope, args) =>
      write(scope, stringArg(args, 0, 'path'), stringArg(args, 1, 'text'), 'text/plain; charset=utf-8'),
    'data.writeJson': (scope, args) => write(scope, stringArg(args, 0, 'path'), serialize(args[1]), 'application/json'),
    'data.appendJsonl': async (scope, args) => {
      const raw = stringArg(args, 0, 'path');
      const line = serialize(args[1]);
      const key = `${scope.site.bucket_id}:${dataPath(raw)}`;
      const run = (appendLocks.get(key) ?? Promise.resolve()).catch(() => {}).then(() => appendLine(scope, raw, line));
      appendLocks.set(key, run);
      try {
        return await run;
      } finally {
        if (appendLocks.get(key) === run) appendLocks.delete(key);
      }
    },
    'data.list': async (scope, args) => {
      const base = dataPath(args[0] == null ? '' : stringArg(args, 0, 'prefix'), 'prefix');
      const rows = (await scope.deps
        .db('files')
        .join('file_versions', 'file_versions.id', 'files.current_version_id')
        .where('files.bucket_id', scope.site.bucket_id)
        .andWhereRaw('substr(files.path, 1, ?) = ?', [base.length, base])
        .orderBy('files.path')
        .limit(10_000)
        .select('files.path', 'file_versions.bytes', 'files.updated_at')) as Array<{
        path: string;
        bytes: number;
        updated_at: string;
      }>;
      return rows.map((r) => ({ path: r.path, bytes: r.bytes, updatedAt: r.updated_at }));
    },
    'db.query': (scope, args) => db(scope, 'db.query', args),
    'db.first': (scope, args) => db(scope, 'db.first', args),
    'db.execute': (scope, args) => db(scope, 'db.execute', args),
    'db.batch': (scope, args) => db(scope, 'db.batch', args),
    'secrets.get': (scope, args) => {
      if (!mayReadSecrets(scope.functionVersion.functionId))
        throw new CtxError(
          'SECRETS_NOT_GIVEN',
          "this preview was not given the site's secrets: the deployment's owner can give them (previewSecrets); an instant's preview never has them",
        );
      return readSecretForSite(scope.deps, scope.site.id, stringArg(args, 0, 'name'));
    },
    'llm.messages.create': async (scope, args) => {
      try {
        return await createMessage(scope.deps, scope.site.account_id, args[0]);
      } catch (err) {
        // Model errors keep their own code and HTTP status, so an uncaught one answers with them.
        if (err instanceof BerthError) throw new CtxError(err.code, err.message, err.status);
        throw err;
      }
    },
  };
}

/** The site a worker serves, from the cache that site changes clear. */
async function siteRow(deps: Deps, id: string): Promise<SiteRow | null> {
  const cached = deps.hostingCache.siteRow(id);
  if (cached !== undefined) return cached;
  const generation = deps.hostingCache.generation();
  const row = (await deps.db<SiteRow>('sites').where({ id }).first()) ?? null;
  deps.hostingCache.rememberSiteRow(generation, id, row);
  return row;
}

export type CtxHandler = (functionVersion: FunctionVersion, call: CtxCall) => Promise<CtxResult>;

/**
 * Serves a worker's asks about its line to its site's database (deno-shim/db-line.ts): `open` (with
 * the worker's token) has the database's process connect to the worker when the site is active and
 * its database ready and served here (false otherwise, and always for a preview's worker, which uses a
 * branch: the worker's calls come through here); `lost` says what a line that broke off mid-call broke
 * off for, as the error its calls would have had here. The line's calls are counted here as they are
 * reported.
 */
export function createDbLineHandler(deps: Deps) {
  const onCalls = (siteId: string) => (calls: Record<string, number>) => {
    for (const [method, count] of Object.entries(calls)) {
      for (let i = 0; i < count; i++) {
        deps.metrics.ctxCall(method);
        deps.analytics.databaseCall(siteId);
      }
    }
  };
  return async (functionVersion: FunctionVersion, link: string, args: unknown[]): Promise<CtxResult> => {
    const { siteId } = functionVersion;
    try {
      if (args[0] === 'open' && typeof args[1] === 'string') {
        // A preview's worker calls its branch through the host.
        if (functionVersion.branch) return { ok: true, value: false };
        const site = await siteRow(deps, siteId);
        if (site?.status !== 'ACTIVE' || !(await hasDatabase(deps, siteId))) return { ok: true, value: false };
        return { ok: true, value: await deps.siteDatabases.openLine(siteId, link, args[1], onCalls(siteId)) };
      }
      if (args[0] === 'lost' && typeof args[1] === 'string') {
        const lost = await deps.siteDatabases.lineLost(siteId, args[1]);
        const failure = functionFailure(lost.reason, lost.message);
        if (failure.diagnostic) {
          deps.functionLogs.add(siteId, functionVersion.path, {
            requestId: typeof args[2] === 'string' ? args[2] : null,
            level: 'error',
            message: `ctx.db: ${failure.diagnostic}`,
          });
        }
        return { ok: false, error: { code: failure.code, message: failure.message } };
      }
      return { ok: false, error: { code: CtxErrorCode.InvalidArgument, message: 'not a line request' } };
    } catch (err) {
      logJobFailure(deps.log, err, 'a database line could not be opened', {
        functionId: functionVersion.functionId,
      });
      return { ok: true, value: false };
    }
  };
}

/**
 * Lines are given only to the workers of an active site with a ready database: when a site or its
 * database changes, that site's lines close (every site's after changes may have been missed), and
 * the next call asks again.
 */
export function closingDbLines(deps: Pick<Deps, 'siteDatabases' | 'log'>): ChangeListener {
  const close = (siteId?: string) =>
    void deps.siteDatabases
      .closeLines(siteId)
      .catch((err: unknown) => deps.log.warn({ err }, 'database lines could not be closed'));
  return {
    change: (change) => {
      if (change.kind === 'sites' || change.kind === 'database') close(change.siteId);
    },
    resync: () => close(),
  };
}

/** The handler of one server's ctx calls. */
export function createCtxHandler(deps: Deps): CtxHandler {
  const methods = createMethods();
  return (functionVersion, call) => handleCtxCall(deps, methods, functionVersion, call);
}

/** Answers every call with a result, never a rejection, whatever the call holds. */
async function handleCtxCall(
  deps: Deps,
  methods: Record<CtxMethod, Method>,
  functionVersion: FunctionVersion,
  call: CtxCall,
): Promise<CtxResult> {
  try {
    const method =
      typeof call?.method === 'string' && Object.hasOwn(methods, call.method)
        ? methods[call.method as CtxMethod]
        : undefined;
    if (!method) {
      return {
        ok: false,
        error: { code: CtxErrorCode.UnknownMethod, message: `ctx.${String(call?.method)} is not available` },
      };
    }
    deps.metrics.ctxCall(call.method);
    if (call.method.startsWith('db.')) deps.analytics.databaseCall(functionVersion.siteId);
    if (!Array.isArray(call.args)) {
      return { ok: false, error: { code: CtxErrorCode.InvalidArgument, message: 'arguments must be a list' } };
    }
    const site = await siteRow(deps, functionVersion.siteId);
    if (site?.status !== 'ACTIVE') throw new CtxError(CtxErrorCode.Failed, 'the site is not active');
    const actor: Actor = {
      via: 'function',
      accountId: site.account_id,
      id: `function:${functionVersion.functionId}`,
      permission: 'WRITE',
    };
    return {
      ok: true,
      value: await method(
        { deps, functionVersion, requestId: typeof call.requestId === 'string' ? call.requestId : null, site, actor },
        call.args,
      ),
    };
  } catch (err) {
    if (err instanceof CtxError) {
      return {
        ok: false,
        error: { code: err.code, message: err.message, ...(err.status ? { status: err.status } : {}) },
      };
    }
    if (err instanceof BerthError)
      return { ok: false, error: { code: `DATA_${err.code.toUpperCase()}`, message: err.message } };
    if (err instanceof StorageUnavailableError) {
      deps.log.warn(
        { functionId: functionVersion.functionId, reason: err.message },
        'the blob store did not answer a ctx call',
      );
      const { code, message, status } = storageUnavailable();
      return { ok: false, error: { code: `DATA_${code.toUpperCase()}`, message, status } };
    }
    logJobFailure(deps.log, err, 'ctx call failed', { functionId: functionVersion.functionId });
    const why = isMetadataUnavailable(err) ? ': the metadata database is not answering, try again shortly' : '';
    return { ok: false, error: { code: CtxErrorCode.Failed, message: `ctx.${String(call?.method)} failed${why}` } };
  }
}
