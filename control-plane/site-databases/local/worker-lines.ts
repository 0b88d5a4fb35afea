// The workers' lines to their site's database process, as the host keeps them: opened at a
// worker's ask (the process's one socket path linked to the worker's, a token checked), pinged while
// open (what they did, and their statements' time limit), closed before anything needs the database
// to itself, and why one broke off told to its worker.
import fsp from 'node:fs/promises';
import { DatabaseProcessError } from '../database-process.ts';
import { LINE_TOKEN_CHARS, type LineStats } from '../protocol.ts';
import { StatementError } from '../provider.ts';
import { type SiteCalls, timedOut } from './calls.ts';
import type { SiteDatabaseOptions } from './options.ts';
import type { SiteProcess, SiteProcesses } from './site-processes.ts';

/** A process with lines is pinged this often: an unanswered ping is a line's statement running. */
const PING_MS = 1000;
/** How long a stopped process's tokens are kept, so a worker whose line broke can learn why. */
const TOKENS_KEPT_MS = 60_000;
/**
 * Tokens kept at most: a long-lived process gives one to every line its workers open, and a line
 * its worker ended is never heard of again. The oldest go first (a line lost then is told only that
 * it closed).
 */
const MAX_TOKENS = 10_000;

const TOKEN = new RegExp(`^[0-9a-f]{${LINE_TOKEN_CHARS}}$`);

export class WorkerLines {
  readonly #options: SiteDatabaseOptions;
  readonly #processes: SiteProcesses;
  readonly #calls: SiteCalls;
  /** Processes whose workers may have lines open, and the ping that times their statements. */
  readonly #pinged = new Map<SiteProcess, NodeJS.Timeout>();
  /** Line tokens given, by the process that lets them in. */
  readonly #tokens = new Map<string, SiteProcess>();
  /** Who hears each site's line calls. */
  readonly #onCalls = new Map<string, (calls: Record<string, number>) => void>();
  /** The connect under way of each process, which the next waits for. */
  readonly #connecting = new WeakMap<SiteProcess, Promise<unknown>>();
  /** Lines opening now: a close of their site's lines meanwhile marks them, and they close too. */
  readonly #opening = new Set<{ siteId: string; closed: boolean }>();
  #lineCalls = 0;

  constructor(options: SiteDatabaseOptions, processes: SiteProcesses, calls: SiteCalls) {
    this.#options = options;
    this.#processes = processes;
    this.#calls = calls;
  }

  async open(
    siteId: string,
    link: string,
    token: string,
    onCalls: (calls: Record<string, number>) => void,
  ): Promise<boolean> {
    if (!this.#options.lineDir || !TOKEN.test(token) || !this.#calls.normal(siteId)) return false;
    this.#onCalls.set(siteId, onCalls);
    const opening = { siteId, closed: false };
    this.#opening.add(opening);
    const timeoutMs = this.#options.statementTimeoutMs;
    // Counted as a call in flight, so a pause that begins meanwhile closes this line too.
    return this.#calls
      .counted(siteId, async () => {
        const process = await this.#processes.acquire(siteId);
        try {
          if (!process.linePath) return false;
          const connected = await this.#linked(process, link, () => process.call({ op: 'connect', token }, timeoutMs));
          if (!connected.ok || !process.alive) return false;
          this.#tokens.set(token, process);
          if (this.#tokens.size > (this.#options.maxLineTokens ?? MAX_TOKENS))
            this.#tokens.delete(this.#tokens.keys().next().value!);
          this.#ping(process);
          if (opening.closed || !this.#calls.normal(siteId)) {
            // Lines were closed while this one opened: it closes too.
            await process.call({ op: 'close-lines' }, timeoutMs).catch(() => {});
            return false;
          }
          return true;
        } catch (err) {
          if (err instanceof DatabaseProcessError || (err as NodeJS.ErrnoException).code) return false;
          throw err;
        } finally {
          this.#processes.release(process);
        }
      })
      .catch((err: unknown) => {
        // No process to be had (none free, or no database): the calls come through the host, which says so.
        if (err instanceof StatementError) return false;
        throw err;
      })
      .finally(() => this.#opening.delete(opening));
  }

  /**
   * Runs `work` (a connect) with the process's one line path linked to the worker's socket `target`:
   * one at a time per process, the link replaced in one step.
   */
  #linked<T>(process: SiteProcess, target: string, work: () => Promise<T>): Promise<T> {
    const path = process.linePath!;
    const run = (this.#connecting.get(process) ?? Promise.resolve())
      .catch(() => {})
      .then(async () => {
        const temporary = `${path}.tmp`;
        await fsp.rm(temporary, { force: true });
        await fsp.symlink(target, temporary);
        await fsp.rename(temporary, path);
        return work();
      });
    this.#connecting.set(process, run);
    return run;
  }

  async lost(siteId: string, token: string): Promise<StatementError> {
    const process = this.#tokens.get(token);
    if (!process || process.siteId !== siteId)
      return new StatementError('unavailable', 'the line to the database closed');
    // The worker may hear its line close before the host hears the process end.
    const reason =
      process.stopReason ??
      (await Promise.race([
        process.exited,
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000)),
      ]));
    if (reason === 'timeout') return timedOut(this.#options.statementTimeoutMs);
    return new StatementError(
      'unavailable',
      reason ? new DatabaseProcessError(reason).message : 'the line to the database closed',
    );
  }

  async close(siteId?: string): Promise<void> {
    const closes = (site: string) => siteId === undefined || site === siteId;
    const closing = [...this.#pinged.keys()].filter((process) => closes(process.siteId));
    for (const opening of this.#opening) if (closes(opening.siteId)) opening.closed = true;
    await Promise.all(
      closing.map(async (process) => {
        this.forget(process);
        // Answered once no line statement runs; a process that stops meanwhile has closed them too.
        await process.call({ op: 'close-lines' }, this.#options.statementTimeoutMs).catch(() => {});
      }),
    );
  }

  /**
   * While a process has lines it is pinged every PING_MS, which brings what they did (Stats) and
   * times their statements: a ping not answered within the statement time limit stops the process as
   * a statement past its limit, as one sent through the host is.
   */
  #ping(process: SiteProcess): void {
    if (this.#pinged.has(process)) return;
    let pinging = false;
    const timer = setInterval(() => {
      if (pinging || !process.alive) return;
      pinging = true;
      process
        .call({ op: 'ping' }, this.#options.statementTimeoutMs)
        .catch(() => {})
        .finally(() => (pinging = false));
    }, PING_MS);
    timer.unref();
    this.#pinged.set(process, timer);
  }

  get calls(): number {
    return this.#lineCalls;
  }

  /** Line tokens kept, so a worker whose line broke can learn why (at most maxLineTokens). */
  get tokens(): number {
    return this.#tokens.size;
  }

  /** Stops pinging the process; once it has exited, its tokens are forgotten after TOKENS_KEPT_MS. */
  forget(process: SiteProcess): void {
    clearInterval(this.#pinged.get(process));
    this.#pinged.delete(process);
    if (process.alive) return;
    setTimeout(() => {
      for (const [token, owner] of this.#tokens) if (owner === process) this.#tokens.delete(token);
    }, TOKENS_KEPT_MS).unref();
  }

  /** What a process's lines did, heard as the host hears its own calls. */
  stats(siteId: string, stats: LineStats): void {
    const observe = this.#options.onStatement;
    if (observe) for (const [ok, seconds] of stats.statements) observe('function', ok, seconds);
    if (stats.firstWriteAt !== null) this.#options.replicas?.replicator.wrote(siteId, stats.firstWriteAt);
    this.#onCalls.get(siteId)?.(stats.calls);
    for (const count of Object.values(stats.calls)) this.#lineCalls += count;
    // The lines' calls are the process's use: it is not stopped as idle while they come.
    const live = this.#processes.live(siteId);
    if (live) this.#processes.release(live);
  }
}
