// What every part of a start is (the blob store, the metadata, the logs, the site databases, the
// runtime, the domains, TLS, the jobs…): compose.ts opens the parts of its list in order, each in the
// same four steps, and each part's code lives in its own folder. A part registers every close on the
// start's CloseStack the moment the thing is open, so a start that fails half-way releases exactly what
// it had opened, and the server's stop releases everything in the reverse order.
import type http from 'node:http';
import type https from 'node:https';
import type { CloseStack } from './close-stack.ts';
import type { Config } from './config.ts';
import type { ChangeListener } from './db/changes.ts';
import type { Deps } from './deps.ts';
import type { Logger } from './log.ts';

/** What a part is given to open with, besides what the parts before it opened. */
export interface Opening {
  config: Config;
  log: Logger;
  /** Where Deno is, found before anything was opened. */
  denoPath: string;
  /** The clock is a test's own (it drives cron and analytics with it). */
  testClock: boolean;
  /** How much lower function workers' CPU priority is than the server's (default 10); benches compare with 0. */
  workerNice?: number | undefined;
  stack: CloseStack;
}

/** A listener a part serves beside the main one; server.ts binds it and closes it through the stack. */
export interface PartListener {
  server: http.Server | https.Server;
  host: string;
  port: number;
  /** The settings a failure to listen points the operator to (default: BERTH_PORT and BERTH_BIND). */
  names?: { port: string; bind: string };
  /** The one path it answers, when it answers only one (the metrics' /metrics). */
  path?: string;
  /**
   * `public`: answers sites and the control plane with the main listener's handler, drained with it
   * within the grace period; `calls`: other nodes' calls, closed once the public listeners are, its
   * calls in flight answered; `private`: closed at once (the metrics).
   */
  kind: 'public' | 'calls' | 'private';
}

export interface Part {
  /** What the part is, in failures of its close. */
  name: string;
  /**
   * Opens what the part holds, given what the parts before it added (`opened` picks the fields it
   * needs), registering each close on the stack; returns the fields it adds to Deps.
   */
  open?(deps: Partial<Deps>, opening: Opening): Partial<Deps> | Promise<Partial<Deps>>;
  /** With every part open: the change-feed listeners it subscribes. */
  listens?(deps: Deps): ChangeListener[];
  /** With every part open and listening: its start-time work and its jobs, each stop on the stack. */
  start?(deps: Deps, stack: CloseStack): void | Promise<void>;
  /** Its listeners beside the main one, given the main one's request handler. */
  serves?(deps: Deps, handle: http.RequestListener): PartListener[];
}

/** The fields `keys` of what the parts before this one opened; one missing is a part listed too early. */
export function opened<K extends keyof Deps>(deps: Partial<Deps>, part: string, ...keys: K[]): Pick<Deps, K> {
  for (const key of keys)
    if (deps[key] === undefined) throw new Error(`${part} needs ${String(key)}, which no part before it opened`);
  return deps as Pick<Deps, K>;
}

/** "127.0.0.1:9464" or "[::1]:9464" as the host and port a listener binds. */
export function listenAddress(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
}
