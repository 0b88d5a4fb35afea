// A node's replicator: one Litestream process for every site database this node has open, copying
// each one's write-ahead log to its replica within about a second of a commit. The engine reads its set
// of databases once, at its start, so a change of set restarts it; a graceful stop ships what each
// database has not shipped yet, and the next start resumes each database's history where it stopped.
// Only databases in use are replicated (the engine's cost grows with its set even when they are
// idle): a database joins before its first statement runs and leaves some minutes after its last one.
// Progress is read from the engine's metrics (on a loopback port of its own): what it has read of each
// database's log and what it has shipped. Its log goes to a file, not to a pipe: a pipe whose reader
// died with a killed server would kill it on its next line, before it ships what it has.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { loopbackPort } from '../../loopback-port.ts';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import type { Logger } from '../../log.ts';
import { writeFileDurably } from '../../../storage/durable.ts';
import {
  forgetGeneration,
  litestreamBinary,
  litestreamConfig,
  type ReplicaTarget,
  type ReplicatedDatabase,
  type ReplicationTiming,
} from './litestream.ts';

export interface ReplicatorOptions {
  /** Where the engine's configuration lives: a folder of the data dir's runtime folder. */
  workDir: string;
  target: ReplicaTarget;
  timing: ReplicationTiming;
  log: Logger;
  /** A database whose last statement ran this long ago leaves the set (at the next change of set). */
  lingerMs?: number;
  /** How long a database may wait to join before its statements run anyway (and the wait is logged). */
  joinTimeoutMs?: number;
}

/** What a node knows of one database's replication. */
export interface ReplicaStatus {
  siteId: string;
  /** The last time the engine shipped some of its log (or a full copy) to the replica; null: not since this start. */
  replicatedAt: Date | null;
  /** Every write acknowledged so far is known to be in the replica. */
  upToDate: boolean;
  /** How long the oldest write not yet known to be in the replica has waited; 0: none waits. */
  lagMs: number;
  /** Log bytes shipped to the replica since the database joined (as the engine counts them, uncompressed). */
  shippedBytes: number;
}

interface Entry {
  file: string;
  /** When its process last closed; null while it is open. */
  idleSince: number | null;
  replicatedAt: number | null;
  /** Writes acknowledged up to this time are in the replica. */
  confirmedThrough: number;
  /** The oldest write after confirmedThrough, and the newest. */
  firstPendingAt: number | null;
  lastWriteAt: number;
  /** Callers waiting for the engine to replicate it. */
  joined: Array<() => void>;
  /** Log bytes the engine has read from the database and shipped, at the last look. */
  read: number;
  shipped: number;
  shippedTotal: number;
}

/** The engine polls each database and ships what changed at most this often (see litestream.ts). */
const CYCLE_MS = 1000;
const STOP_GRACE_MS = 15_000;
const RESTART_BACKOFF_MS = [1000, 2000, 5000, 10_000, 30_000];
/** Past this lag, the node reports replication as stalled (/readyz). */
export const STALLED_MS = 60_000;

export class Replicator {
  readonly #options: ReplicatorOptions;
  readonly #binary = litestreamBinary();
  readonly #entries = new Map<string, Entry>();
  readonly #byFile = new Map<string, string>();
  #child: ResultPromise | null = null;
  #childStartedAt = 0;
  /** The running engine's metrics. */
  #metricsUrl = '';
  #errorsAtStart = 0;
  readonly #looker: NodeJS.Timeout;
  #looking = false;
  #lastLook = 0;
  /** The set the running engine was started with. */
  #running = new Set<string>();
  #reconciling: Promise<void> = Promise.resolve();
  #pending = false;
  /** Databases whose next start begins a new generation (renew). */
  readonly #renewing = new Set<string>();
  #failures = 0;
  #retry: NodeJS.Timeout | undefined;
  #trim: NodeJS.Timeout;
  #closed = false;
  /** Fenced (cluster/fence.ts): the engine stays stopped until resume(). */
  #suspended = false;
  /** Log lines the engine wrote at ERROR level, for /metrics. */
  errors = 0;
  restarts = 0;

  constructor(options: ReplicatorOptions) {
    this.#options = options;
    this.#trim = setInterval(() => this.#trimIdle(), 60_000);
    this.#trim.unref();
    this.#looker = setInterval(() => void this.#look(), CYCLE_MS);
    this.#looker.unref();
  }

  get #config(): string {
    return replicatorConfigFile(this.#options.workDir);
  }

  /**
   * Adds the database to the set; resolves once the engine replicates it, or after joinTimeoutMs
   * (its writes are not held back by a replicator in trouble, which /readyz and the log report).
   */
  async watch(siteId: string, file: string): Promise<void> {
    const entry = this.#entries.get(siteId);
    if (entry) {
      entry.idleSince = null;
      if (this.#running.has(siteId) && this.#child) return;
    } else {
      this.#entries.set(siteId, {
        file,
        idleSince: null,
        replicatedAt: null,
        confirmedThrough: 0,
        firstPendingAt: null,
        lastWriteAt: 0,
        joined: [],
        read: 0,
        shipped: 0,
        shippedTotal: 0,
      });
      this.#byFile.set(file, siteId);
    }
    const joined = new Promise<void>((resolve) => this.#entries.get(siteId)!.joined.push(resolve));
    this.#schedule();
    let timer: NodeJS.Timeout | undefined;
    const timeoutMs = this.#options.joinTimeoutMs ?? 10_000;
    const late = await Promise.race([
      joined.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (late)
      this.#options.log.warn(
        { siteId, waitedMs: timeoutMs },
        'the replicator did not take a site database in time: its statements run, not yet replicated',
      );
  }

  /**
   * Makes the engine begin a new generation of the database (a fresh full copy): its older history
   * then lies wholly in older generations, which can be dropped. Restarts the engine.
   */
  async renew(siteId: string): Promise<void> {
    if (!this.#running.has(siteId)) return;
    this.#renewing.add(siteId);
    this.#schedule();
    await this.#reconciling;
  }

  /** The database's process closed: it stays replicated a while, in case it is used again soon. */
  idle(siteId: string): void {
    const entry = this.#entries.get(siteId);
    if (entry) entry.idleSince = Date.now();
  }

  /**
   * Takes the database out of the set now: resolves once the engine has shipped the last of its log
   * and let go of it (before its file is replaced, moved or removed).
   */
  async unwatch(siteId: string): Promise<void> {
    const entry = this.#entries.get(siteId);
    if (!entry) return;
    this.#entries.delete(siteId);
    this.#byFile.delete(entry.file);
    for (const resolve of entry.joined) resolve();
    this.#schedule();
    await this.#reconciling;
    while (this.#running.has(siteId)) await this.#reconcile();
  }

  /**
   * A write to the database was acknowledged, of a call sent at `sentAt`: its lag counts from then
   * (the write committed after it) until the engine ships it.
   */
  wrote(siteId: string, sentAt: number): void {
    const entry = this.#entries.get(siteId);
    if (!entry) return;
    if (entry.firstPendingAt === null || sentAt < entry.firstPendingAt) entry.firstPendingAt = sentAt;
    entry.lastWriteAt = Math.max(entry.lastWriteAt, Date.now());
  }

  status(siteId: string): ReplicaStatus | null {
    const entry = this.#entries.get(siteId);
    return entry ? this.#statusOf(siteId, entry) : null;
  }

  statuses(): ReplicaStatus[] {
    return [...this.#entries].map(([siteId, entry]) => this.#statusOf(siteId, entry));
  }

  /** Some database has waited past STALLED_MS for its writes to ship, or the engine is not running. */
  stalled(): string | null {
    if (this.#closed) return null;
    if (this.#entries.size > 0 && !this.#child && this.#failures > 0)
      return 'the replicator is not running (it is restarted with backoff)';
    const worst = Math.max(0, ...this.statuses().map((s) => s.lagMs));
    return worst > STALLED_MS
      ? `a site database's writes have waited ${Math.round(worst / 1000)} s to be replicated`
      : null;
  }

  /**
   * Stops the engine gracefully (it ships what it has not shipped yet) and forgets its set until
   * resume(): each database joins again when it is next opened.
   */
  async suspend(): Promise<void> {
    this.#suspended = true;
    await this.#reconciling;
    await this.#stopChild();
    for (const entry of this.#entries.values()) for (const resolve of entry.joined.splice(0)) resolve();
    this.#entries.clear();
    this.#byFile.clear();
  }

  resume(): void {
    this.#suspended = false;
    this.#schedule();
  }

  /** Stops the engine gracefully: it ships what it has not shipped yet. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#trim);
    clearInterval(this.#looker);
    clearTimeout(this.#retry);
    await this.#reconciling;
    await this.#stopChild();
    for (const entry of this.#entries.values()) for (const resolve of entry.joined) resolve();
  }

  #statusOf(siteId: string, entry: Entry): ReplicaStatus {
    const now = Date.now();
    return {
      siteId,
      replicatedAt: entry.replicatedAt === null ? null : new Date(entry.replicatedAt),
      upToDate: entry.firstPendingAt === null,
      lagMs: entry.firstPendingAt === null ? 0 : now - entry.firstPendingAt,
      shippedBytes: entry.shippedTotal,
    };
  }

  /**
   * Reads the engine's metrics: for each database, the log bytes it has read and those it has shipped.
   * It reads a database's log every cycle, so once it has shipped all it read, every write acknowledged
   * a cycle before is in the replica. Looked at every cycle while there is news to wait for, else every ten.
   */
  async #look(): Promise<void> {
    if (this.#looking || !this.#child || !this.#metricsUrl) return;
    // Every cycle while writes wait or a database that joined has not shipped yet.
    const waiting = [...this.#entries.values()].some(
      (entry) => entry.firstPendingAt !== null || entry.replicatedAt === null,
    );
    if (!waiting && Date.now() - this.#lastLook < 10 * CYCLE_MS) return;
    this.#looking = true;
    try {
      const at = Date.now();
      const text = await (await fetch(this.#metricsUrl, { signal: AbortSignal.timeout(2 * CYCLE_MS) })).text();
      this.#lastLook = at;
      const metrics = parseMetrics(text);
      let errors = 0;
      for (const [key, value] of metrics) {
        const [name, db] = key.split('\u0000') as [string, string];
        if (name === 'litestream_sync_error_count' || name === 'litestream_checkpoint_error_count') errors += value;
        const siteId = this.#byFile.get(db);
        const entry = siteId ? this.#entries.get(siteId) : undefined;
        if (!entry) continue;
        if (name === 'litestream_total_wal_bytes') entry.read = value;
        else if (name === 'litestream_replica_wal_bytes') {
          if (value > entry.shipped) {
            entry.replicatedAt = at;
            entry.shippedTotal += value - entry.shipped;
          }
          entry.shipped = value;
        }
      }
      this.errors = this.#errorsAtStart + errors;
      // Only a database the running engine follows has shipped what it read.
      for (const siteId of this.#running) {
        const entry = this.#entries.get(siteId);
        if (entry && entry.shipped >= entry.read) this.#confirm(entry, at - CYCLE_MS - 100);
      }
    } catch {
      // The engine is starting or stopping: the next look tells.
    } finally {
      this.#looking = false;
    }
  }

  #confirm(entry: Entry, through: number): void {
    if (through <= entry.confirmedThrough) return;
    entry.confirmedThrough = through;
    if (entry.firstPendingAt === null) return;
    if (entry.lastWriteAt <= through) entry.firstPendingAt = null;
    else if (entry.firstPendingAt <= through) entry.firstPendingAt = through;
  }

  #trimIdle(): void {
    const linger = this.#options.lingerMs ?? 10 * 60_000;
    let removed = false;
    for (const [siteId, entry] of this.#entries) {
      if (entry.idleSince === null || Date.now() - entry.idleSince < linger || entry.firstPendingAt !== null) continue;
      this.#entries.delete(siteId);
      this.#byFile.delete(entry.file);
      removed = true;
    }
    if (removed) this.#schedule();
  }

  /** Brings the engine's set in line with the entries, once for every change that arrives meanwhile. */
  #schedule(): void {
    if (this.#closed || this.#suspended || this.#pending) return;
    this.#pending = true;
    this.#reconciling = this.#reconciling.then(() => {
      this.#pending = false;
      return this.#reconcile();
    });
  }

  async #reconcile(): Promise<void> {
    if (this.#closed || this.#suspended) return;
    const wanted = [...this.#entries.keys()].sort();
    const same =
      this.#child !== null &&
      this.#renewing.size === 0 &&
      wanted.length === this.#running.size &&
      wanted.every((s) => this.#running.has(s));
    if (same) return this.#releaseJoined();
    await this.#stopChild();
    for (const siteId of this.#renewing) {
      const entry = this.#entries.get(siteId);
      if (entry) await forgetGeneration(entry.file);
    }
    this.#renewing.clear();
    if (wanted.length === 0) return;
    try {
      await this.#startChild(wanted);
      this.#failures = 0;
    } catch (err) {
      this.#failures++;
      const backoff = RESTART_BACKOFF_MS[Math.min(this.#failures, RESTART_BACKOFF_MS.length) - 1]!;
      this.#options.log.error({ err, retryInMs: backoff }, 'the database replicator could not start');
      clearTimeout(this.#retry);
      this.#retry = setTimeout(() => this.#schedule(), backoff);
      this.#retry.unref();
    }
  }

  #releaseJoined(): void {
    for (const siteId of this.#running) {
      const entry = this.#entries.get(siteId);
      if (!entry) continue;
      for (const resolve of entry.joined.splice(0)) resolve();
    }
  }

  async #startChild(siteIds: string[]): Promise<void> {
    const databases: ReplicatedDatabase[] = siteIds.map((siteId) => ({
      siteId,
      file: this.#entries.get(siteId)!.file,
    }));
    await fsp.mkdir(this.#options.workDir, { recursive: true, mode: 0o700 });
    const port = await loopbackPort();
    await writeFileDurably(
      this.#config,
      litestreamConfig(databases, this.#options.target, this.#options.timing, `127.0.0.1:${port}`),
    );
    // Its log (warnings and errors) starts afresh at each start, so it stays small.
    const logFile = path.join(this.#options.workDir, 'litestream.log');
    const log = fs.openSync(logFile, 'w', 0o600);
    // The engine stops (gracefully, shipping what it has) once this server has ended, however it ended:
    // one left behind by a server killed outright would go on writing to replicas another node now owns.
    const untilServerEnds = `tail --pid=${process.pid} -f /dev/null`;
    const args = ['replicate', '-config', this.#config, '-no-expand-env', '-exec', untilServerEnds];
    const child = execa(this.#binary, args, {
      cwd: this.#options.workDir,
      // A descriptor number goes to the process as it is (execa's types list only 0 to 9).
      stdio: ['ignore', log as unknown as 'ignore', log as unknown as 'ignore'],
      buffer: false,
      reject: false,
      // Out of the server's process group: Ctrl-C reaches the server, which stops the engine gracefully.
      detached: true,
      cleanup: true,
    });
    fs.closeSync(log);
    this.restarts++;
    this.#errorsAtStart = this.errors;
    for (const siteId of siteIds) {
      const entry = this.#entries.get(siteId)!;
      entry.read = 0;
      entry.shipped = 0;
    }
    this.#metricsUrl = `http://127.0.0.1:${port}/metrics`;
    this.#child = child;
    this.#childStartedAt = Date.now();
    this.#running = new Set(siteIds);
    void child.then((result) => {
      if (this.#child !== child) return;
      this.#child = null;
      this.#running = new Set();
      if (this.#closed) return;
      this.#failures++;
      const backoff = RESTART_BACKOFF_MS[Math.min(this.#failures, RESTART_BACKOFF_MS.length) - 1]!;
      this.#options.log.error(
        { exitCode: result.exitCode, signal: result.signal, retryInMs: backoff },
        'the database replicator stopped unexpectedly',
      );
      this.#retry = setTimeout(() => this.#schedule(), backoff);
      this.#retry.unref();
    });
    const exited = child.then(() => {
      throw new Error('the replicator exited as it started');
    });
    // The engine serves its metrics once it has opened every database of its set.
    const deadline = Date.now() + 30_000;
    try {
      for (;;) {
        const answered = await fetch(this.#metricsUrl, { signal: AbortSignal.timeout(1000) }).then(
          (res) => res.ok,
          () => false,
        );
        if (answered) break;
        if (Date.now() > deadline) throw new Error('the replicator did not take its databases within 30 s');
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 50))]);
      }
    } finally {
      exited.catch(() => undefined);
    }
    this.#releaseJoined();
  }

  async #stopChild(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = null;
    this.#running = new Set();
    // The engine reads a database for the first time a cycle after it starts, and ships on its stop
    // only what it has read before: stopped sooner, it would leave the newest writes unshipped.
    const young = this.#childStartedAt + CYCLE_MS + 300 - Date.now();
    if (young > 0) await new Promise((resolve) => setTimeout(resolve, young));
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await child;
    clearTimeout(killer);
  }
}

/** What the command line of this data dir's engine mentions: a start stops one a killed server left. */
export const replicatorConfigFile = (workDir: string): string => path.join(workDir, 'litestream.json');

/** A port free on the loopback interface now, for the engine's metrics. */
/** Prometheus text: each sample keyed by its name and its `db` label, summed over other labels. */
function parseMetrics(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('litestream_')) continue;
    const match = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
    if (!match) continue;
    const db = /(?:^|,)db="((?:[^"\\]|\\.)*)"/
      .exec(match[2]!)?.[1]
      ?.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    if (db === undefined) continue;
    const key = `${match[1]}\u0000${db}`;
    samples.set(key, (samples.get(key) ?? 0) + Number(match[3]));
  }
  return samples;
}
