// Runs before the function's module is evaluated (the shim imports it first, and the entry imports
// the shim). Removes storage that Deno would persist on disk keyed by the main module, so nothing
// survives or leaks between function versions, routes console output to the host's per-site function logs,
// keeps host paths (Deno's install, the data dir) out of the function's reach, and leaves signals sent
// to the whole service to the host (signals.ts).
import { AsyncLocalStorage } from 'node:async_hooks';
import { type LogEntry, type LogLevel, MAX_LOG_CHARS, pathRedactor } from '../runtime-host/protocol.ts';
import { leaveStoppingToTheHost } from './signals.ts';

leaveStoppingToTheHost();

for (const name of ['localStorage', 'sessionStorage', 'caches']) {
  Reflect.deleteProperty(globalThis, name);
}

// The executable's path is the only host path left in Deno's own APIs: the program comes on stdin,
// so the arguments are empty and the main module is `$deno$stdin.mts`, the worker runs in `/`, and
// the host spawns it with argv0 "deno". Node's `process`, which Deno makes on first use (it costs a
// cold start about 20 ms, so nothing here touches it), takes its execPath and argv from this too.
Object.defineProperty(Deno, 'execPath', {
  value: () => 'deno',
  writable: false,
  configurable: false,
});

/**
 * Stack traces name the function by its path in the site and the shim by its file name. The formatter
 * cannot be replaced, so user code never sees V8's call sites, which would give the real file URLs.
 */
export function hideHostPaths(functionUrl: string, sourcePath: string): void {
  const redact = pathRedactor(functionUrl, sourcePath, new URL('../', import.meta.url).href);
  const describe = (error: unknown): string => {
    try {
      return Error.prototype.toString.call(error);
    } catch {
      return 'Error';
    }
  };
  Object.defineProperty(Error, 'prepareStackTrace', {
    value: (error: unknown, frames: unknown[]) =>
      redact([describe(error), ...frames.map((frame) => `    at ${String(frame)}`)].join('\n')),
    writable: false,
    configurable: false,
  });
}

/** The request a piece of async work belongs to, so logs and ctx calls can name it. */
export const currentRequest = new AsyncLocalStorage<string>();

type LogSink = (entry: LogEntry) => void;
const pending: LogEntry[] = [];
let sink: LogSink = (entry) => {
  if (pending.length < 1000) pending.push(entry);
};

/** Starts sending log lines to the host, flushing what was logged before the channel was open. */
export function setLogSink(next: LogSink): void {
  sink = next;
  for (const entry of pending.splice(0)) next(entry);
}

function format(args: unknown[]): string {
  const text = args
    .map((arg) => (typeof arg === 'string' ? arg : Deno.inspect(arg, { depth: 4, colors: false })))
    .join(' ');
  return text.length > MAX_LOG_CHARS ? `${text.slice(0, MAX_LOG_CHARS)}… (truncated)` : text;
}

const levels: Record<string, LogLevel> = {
  log: 'info',
  info: 'info',
  debug: 'debug',
  trace: 'debug',
  warn: 'warn',
  error: 'error',
};
for (const [method, level] of Object.entries(levels)) {
  (console as unknown as Record<string, unknown>)[method] = (...args: unknown[]) =>
    sink({ requestId: currentRequest.getStore() ?? null, level, message: format(args) });
}
