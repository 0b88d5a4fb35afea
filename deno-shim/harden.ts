// Runs before the function's module is evaluated (the generated entry imports it first).
// Removes storage that Deno would persist on disk keyed by the main module, so nothing survives or
// leaks between deployments, and routes console output to the host's per-site function logs.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { LogEntry, LogLevel } from '../runtime-host/protocol.ts';

for (const name of ['localStorage', 'sessionStorage', 'caches']) {
  Reflect.deleteProperty(globalThis, name);
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

const MAX_LOG_CHARS = 16 * 1024;

function format(args: unknown[]): string {
  const text = args.map((arg) => (typeof arg === 'string' ? arg : Deno.inspect(arg, { depth: 4, colors: false }))).join(' ');
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
