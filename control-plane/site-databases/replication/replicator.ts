// A node's replicator: Litestream processes (engine.ts) for the site databases this node has open,
// copying each one's write-ahead log to its replica within about a second of a commit. An engine reads
// its set of databases once, at its start, so a change of its set restarts it: the databases are split
// among engines of at most GROUP_MAX, databases that join together start an engine of their own, and a
// database that leaves restarts only its own engine, so a tenant opening many databases does not hold
// back the others' replication (a restart of an engine of 200 took 3 s). A graceful stop ships what each
// database has not shipped yet, and the next start resumes each database's history where it stopped.
// Only databases in use are replicated (an engine's cost grows with its set even when they are idle): a
// database joins before its first statement runs and leaves some minutes after its last one; once a
// minute, small engines are merged while there are more than MAX_ENGINES (each costs about 9 MiB).
// Progress is read from each engine's metrics: what it has read of each database's log and what it has
// shipped.
import path from 'node:path';
import type { Logger } from '../../log.ts';
import { CYCLE_MS, Engine } from './engine.ts';
import { forgetGeneration, type ReplicaTarget, type ReplicationTiming } from './litestream.ts';

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
  /**
   * Of these databases, those this node holds now. Asked before each start of the engine: a database
   * placed elsewhere (taken over while this node was cut off) is never replicated from here, since
   * its replica is the holder's to write.
   */
  holds?: (siteIds: string[]) => Promise<Set<string>>;
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
  /**
   * Log bytes the engine read that a new generation's full copy holds: it began with no state of its
   * own (a renewal), so what it read first was copied whole, never shipped as log. Null: not counted
   * yet, until the first look at which such an engine has read anything; 0 otherwise.
   */
  readInCopy: number | null;
}

/** The databases one engine replicates at most: a restart of it pauses them for about a second. */
const GROUP_MAX = 32;
/** Past this many engines, the smallest are merged (once a minute). */
const MAX_ENGINES = 8;
const RESTART_BACKOFF_MS = [1000, 2000, 5000, 10_000, 30_000];
/** Past this lag, the node reports replication as stalled (/readyz). */
export const STALLED_MS = 60_000;

export class Replicator {
  readonly #options: ReplicatorOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #byFile = new Map<string, string>();
  /** The engines, and which one each database is in. */
  readonly #engines = new Set<Engine>();
  readonly #engineOf = new Map<string, Engine>();
  #engineNumber = 0;
  /** Errors counted by engines stopped since, and by each running one at its last look. */
  #errorsBefore = 0;
  readonly #errorsOf = new Map<Engine, number>();
  readonly #looker: NodeJS.Timeout;
  #looking = false;
  #lastLook = 0;
  /** Merge small engines at the next change (see MAX_ENGINES). */
  #compact = false;
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

  /** The database is in an engine that runs. */
  #replicated(siteId: string): boolean {
    return this.#engineOf.get(siteId)?.running === true;
  }

  /**
   * Adds the database to the set; resolves once the engine replicates it, or after joinTimeoutMs
   * (its writes are not held back by a replicator in trouble, which /readyz and the log report).
   */
  async watch(siteId: string, file: string): Promise<void> {
    const entry = this.#entries.get(siteId);
    if (entry) {
      entry.idleSince = null;
      if (this.#replicated(siteId)) return;
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
        readInCopy: 0,
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
    if (!this.#replicated(siteId)) return;
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
    while (this.#engineOf.has(siteId) && !this.#closed && !this.#suspended) await this.#reconcile();
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
    if (this.#failures > 0 && [...this.#entries.keys()].some((siteId) => !this.#replicated(siteId)))
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
    await this.#stopEngines([...this.#engines]);
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
    await this.#stopEngines([...this.#engines]);
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
    if (this.#looking) return;
    // Every cycle while writes wait or a database that joined has not shipped yet.
    const waiting = [...this.#entries.values()].some(
      (entry) => entry.firstPendingAt !== null || entry.replicatedAt === null,
    );
    if (!waiting && Date.now() - this.#lastLook < 10 * CYCLE_MS) return;
    this.#looking = true;
    try {
      const at = Date.now();
      this.#lastLook = at;
      await Promise.all(
        [...this.#engines].filter((engine) => engine.running).map((engine) => this.#lookAt(engine, at)),
      );
      this.errors = this.#errorsBefore + [...this.#errorsOf.values()].reduce((sum, n) => sum + n, 0);
    } finally {
      this.#looking = false;
    }
  }

  async #lookAt(engine: Engine, at: number): Promise<void> {
    let text: string;
    try {
      text = await (await fetch(engine.metricsUrl, { signal: AbortSignal.timeout(2 * CYCLE_MS) })).text();
    } catch {
      return; // The engine is starting or stopping: the next look tells.
    }
    let errors = 0;
    const read = new Map<Entry, number>();
    for (const [key, value] of parseMetrics(text)) {
      const [name, db] = key.split('\u0000') as [string, string];
      if (name === 'litestream_sync_error_count' || name === 'litestream_checkpoint_error_count') errors += value;
      const siteId = this.#byFile.get(db);
      const entry = siteId ? this.#entries.get(siteId) : undefined;
      if (!entry || this.#engineOf.get(siteId!) !== engine) continue;
      if (name === 'litestream_total_wal_bytes') read.set(entry, value);
      else if (name === 'litestream_replica_wal_bytes') {
        if (value > entry.shipped) {
          entry.replicatedAt = at;
          entry.shippedTotal += value - entry.shipped;
        }
        entry.shipped = value;
      }
    }
    for (const [entry, value] of read) {
      // A new generation's engine reads the log into its first copy, then ships as log what it reads
      // after: all it has read but what it shipped is that copy. Taken once it has read anything (a
      // look before its first read sees nothing yet).
      if (entry.readInCopy === null && value > 0) entry.readInCopy = Math.max(0, value - entry.shipped);
      entry.read = value - (entry.readInCopy ?? value);
    }
    if (this.#engines.has(engine)) this.#errorsOf.set(engine, errors);
    // Only a database the engine still follows has shipped what it read.
    if (!engine.running) return;
    for (const siteId of engine.siteIds) {
      const entry = this.#entries.get(siteId);
      if (entry && this.#engineOf.get(siteId) === engine && entry.shipped >= entry.read)
        this.#confirm(entry, at - CYCLE_MS - 100);
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
    if (this.#engines.size > MAX_ENGINES) this.#compact = true;
    if (removed || this.#compact) this.#schedule();
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

  /**
   * Brings the engines in line with the entries: an engine that lost a database (or has one to renew,
   * or ended) restarts with the rest, databases in no engine start new ones, and small engines merge
   * when asked to. Engines untouched by the change go on replicating.
   */
  async #reconcile(): Promise<void> {
    if (this.#closed || this.#suspended) return;
    // Only databases this node holds are replicated from it; without an answer, none joins anew.
    const held = await this.#dropUnheld();
    const restarts: Array<{ engine: Engine; keep: string[] }> = [];
    for (const engine of this.#engines) {
      const keep = [...engine.siteIds].filter((siteId) => this.#entries.has(siteId));
      const renews = keep.some((siteId) => this.#renewing.has(siteId));
      if (engine.running && !renews && keep.length === engine.siteIds.size) continue;
      restarts.push({ engine, keep });
    }
    const merge = this.#compact ? this.#smallEngines(restarts.map((r) => r.engine)) : [];
    this.#compact = false;
    const stopping = [...restarts.map((r) => r.engine), ...merge];
    await this.#stopEngines(stopping);
    const renewed = new Set(this.#renewing);
    for (const siteId of renewed) {
      const entry = this.#entries.get(siteId);
      if (entry) await forgetGeneration(entry.file);
    }
    this.#renewing.clear();
    // Each engine restarted with what it keeps; what it lost, and the merged engines' databases, join anew.
    const groups = restarts.filter((r) => r.keep.length > 0).map((r) => r.keep);
    const homeless = held
      ? [...this.#entries.keys()].filter(
          (siteId) => !this.#engineOf.has(siteId) && !groups.some((g) => g.includes(siteId)),
        )
      : [];
    for (let i = 0; i < homeless.length; i += GROUP_MAX) groups.push(homeless.slice(i, i + GROUP_MAX));
    const started = await Promise.all(groups.map((group) => this.#startEngine(group, renewed)));
    if (started.every(Boolean)) this.#failures = 0;
    this.#releaseJoined();
  }

  /** The smallest engines, besides `busy`, that fit together in one (merged while there are too many). */
  #smallEngines(busy: Engine[]): Engine[] {
    const bySize = [...this.#engines]
      .filter((engine) => engine.running && !busy.includes(engine))
      .sort((a, b) => a.siteIds.size - b.siteIds.size);
    const chosen: Engine[] = [];
    let size = 0;
    for (const engine of bySize) {
      if (this.#engines.size - Math.max(0, chosen.length - 1) <= MAX_ENGINES) break;
      if (size + engine.siteIds.size > GROUP_MAX) break;
      chosen.push(engine);
      size += engine.siteIds.size;
    }
    return chosen.length > 1 ? chosen : [];
  }

  /**
   * Forgets the databases placed on another node (taken over while this one was cut off: their replica
   * is the holder's to write); false, and a retry later, when the placements could not be asked.
   */
  async #dropUnheld(): Promise<boolean> {
    const wanted = [...this.#entries.keys()];
    if (!this.#options.holds || wanted.length === 0) return true;
    let held: Set<string>;
    try {
      held = await this.#options.holds(wanted);
    } catch (err) {
      this.#options.log.error({ err }, 'the database replicator could not learn which databases this node holds');
      this.#failed();
      return false;
    }
    for (const siteId of wanted.filter((id) => !held.has(id))) {
      this.#options.log.warn({ siteId }, 'a site database placed on another node is not replicated from this one');
      const entry = this.#entries.get(siteId)!;
      this.#entries.delete(siteId);
      this.#byFile.delete(entry.file);
      for (const resolve of entry.joined) resolve();
    }
    return true;
  }

  #releaseJoined(): void {
    for (const [siteId, entry] of this.#entries) {
      if (this.#replicated(siteId)) for (const resolve of entry.joined.splice(0)) resolve();
    }
  }

  /** Starts an engine for `siteIds`; false (and a retry later) when it could not start. */
  async #startEngine(siteIds: string[], renewed: ReadonlySet<string> = new Set()): Promise<boolean> {
    const engine = new Engine(
      {
        config: path.join(replicatorConfigFile(this.#options.workDir), `${++this.#engineNumber}.json`),
        target: this.#options.target,
        timing: this.#options.timing,
      },
      siteIds,
    );
    for (const siteId of siteIds) {
      const entry = this.#entries.get(siteId)!;
      entry.read = 0;
      entry.shipped = 0;
      entry.readInCopy = renewed.has(siteId) ? null : 0;
      this.#engineOf.set(siteId, engine);
    }
    this.#engines.add(engine);
    this.restarts++;
    try {
      await engine.start(
        siteIds.map((siteId) => ({ siteId, file: this.#entries.get(siteId)!.file })),
        (result) => {
          if (this.#closed) return;
          this.#options.log.error(
            { ...result, databases: siteIds.length },
            'the database replicator stopped unexpectedly',
          );
          this.#failed();
        },
      );
      return true;
    } catch (err) {
      this.#options.log.error({ err }, 'the database replicator could not start');
      this.#forget(engine);
      this.#failed();
      return false;
    }
  }

  /** An engine ended or could not start: the next change, after a backoff, starts it again. */
  #failed(): void {
    this.#failures++;
    const backoff = RESTART_BACKOFF_MS[Math.min(this.#failures, RESTART_BACKOFF_MS.length) - 1]!;
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => this.#schedule(), backoff);
    this.#retry.unref();
  }

  async #stopEngines(engines: Engine[]): Promise<void> {
    const stopped = await Promise.all(engines.map((engine) => engine.stop()));
    engines.forEach((engine, i) => {
      // A clean stop shipped what the engine had read: the writes acknowledged before it are in the
      // replica, whatever its next engine (a new generation's, say) ships of them and when.
      const toldAt = stopped[i];
      if (toldAt != null)
        for (const siteId of engine.siteIds) {
          const entry = this.#entries.get(siteId);
          if (entry && this.#engineOf.get(siteId) === engine) this.#confirm(entry, toldAt - CYCLE_MS - 100);
        }
      this.#forget(engine);
    });
  }

  #forget(engine: Engine): void {
    this.#engines.delete(engine);
    this.#errorsBefore += this.#errorsOf.get(engine) ?? 0;
    this.#errorsOf.delete(engine);
    for (const siteId of engine.siteIds) if (this.#engineOf.get(siteId) === engine) this.#engineOf.delete(siteId);
  }
}

/**
 * The folder of the engines' configuration, which their command lines mention: a start stops those a
 * killed server left.
 */
export const replicatorConfigFile = (workDir: string): string => path.join(workDir, 'engines');

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
