// Each node counts its sites' traffic in memory, by site and minute, and writes what it counted in
// one batch every flush interval (aligned to the minute's end, so a busy site costs one row per node
// per minute). A request pays a few map updates; a crash loses at most what was not yet written.
// Nodes never write the same row, so the counts of a cluster add up and nothing is counted twice.
import type { Logger } from '../log.ts';
import { logJobFailure } from '../db/errors.ts';
import { observe } from './histogram.ts';
import { MINUTE, type PeriodTally, keptPath } from './store.ts';
import { type Tally, addTally, countKey, newTally } from './tally.ts';

/** Minutes kept in memory while the metadata does not answer; older ones are given up. */
const MAX_PENDING_MINUTES = 60;

export interface CollectorOptions {
  /** Milliseconds since the epoch; the server's clock. */
  clock: () => number;
  /** How often counts are written; aligned so that a flush follows each period's end. */
  flushMs: number;
  write: (tallies: PeriodTally[]) => Promise<void>;
  /** Runs after each write (the roll-ups). */
  afterWrite: () => Promise<void>;
  log: Logger;
}

/** What the request paths and the runtime report a site's traffic to. */
export interface TrafficCounter {
  request(siteId: string, status: number, bytesOut: number, ms: number, path: string, referrer: string | null): void;
  functionCall(siteId: string, ms: number, failed: boolean): void;
  coldStart(siteId: string): void;
  databaseCall(siteId: string): void;
  /** Writes what was counted; resolves once it is stored. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** With BERTH_ANALYTICS=false: nothing is counted (what was stored before stays readable). */
export const COUNTING_NOTHING: TrafficCounter = {
  request: () => {},
  functionCall: () => {},
  coldStart: () => {},
  databaseCall: () => {},
  flush: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

export class AnalyticsCollector implements TrafficCounter {
  readonly #options: CollectorOptions;
  /** The minute being counted (epoch seconds) and its tallies by site. */
  #minute = 0;
  #current = new Map<string, Tally>();
  /** Minutes over and not yet written. */
  #pending: PeriodTally[] = [];
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: CollectorOptions) {
    this.#options = options;
    this.#schedule();
  }

  /** A finished request to a site: its status, bytes sent, duration, path and referring host. */
  request(siteId: string, status: number, bytesOut: number, ms: number, path: string, referrer: string | null): void {
    const tally = this.#tally(siteId);
    tally.requests++;
    const statusClass = Math.floor(status / 100) - 2;
    if (statusClass >= 0 && statusClass < 4) tally.status[statusClass]!++;
    tally.bytesOut += bytesOut;
    observe(tally.latency, ms);
    countKey(tally.paths, keptPath(path));
    if (referrer !== null) countKey(tally.referrers, referrer);
  }

  /** A call of one of the site's functions over HTTP, and whether it failed (threw, timed out, crashed). */
  functionCall(siteId: string, ms: number, failed: boolean): void {
    const tally = this.#tally(siteId);
    tally.functionInvocations++;
    if (failed) tally.functionErrors++;
    observe(tally.functionLatency, ms);
  }

  /** A worker started for one of the site's functions. */
  coldStart(siteId: string): void {
    this.#tally(siteId).coldStarts++;
  }

  /** A statement batch a function sent to the site's database. */
  databaseCall(siteId: string): void {
    this.#tally(siteId).databaseCalls++;
  }

  /** Writes everything counted so far, the current minute included; resolves once it is stored. */
  flush(): Promise<void> {
    this.#rollOver(this.#minuteNow(), true);
    return this.#write();
  }

  /** Stops the timer and writes what is left. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.flush();
  }

  #minuteNow(): number {
    return Math.floor(this.#options.clock() / 1000 / MINUTE) * MINUTE;
  }

  #tally(siteId: string): Tally {
    const minute = this.#minuteNow();
    if (minute !== this.#minute) this.#rollOver(minute, false);
    let tally = this.#current.get(siteId);
    if (!tally) {
      tally = newTally();
      this.#current.set(siteId, tally);
    }
    return tally;
  }

  /** Moves the current minute's tallies to the pending ones when it is over (or `always`). */
  #rollOver(minute: number, always: boolean): void {
    if (minute === this.#minute && !always) return;
    for (const [siteId, tally] of this.#current)
      this.#pending.push({ siteId, at: this.#minute, period: MINUTE, tally });
    this.#current = new Map();
    this.#minute = minute;
  }

  #write(): Promise<void> {
    this.#writing = this.#writing.then(async () => {
      const batch = this.#pending;
      this.#pending = [];
      const { write, afterWrite, log } = this.#options;
      try {
        if (batch.length > 0) await write(batch);
        await afterWrite();
      } catch (err) {
        logJobFailure(log, err, 'could not store site analytics');
        this.#keep(batch);
      }
    });
    return this.#writing;
  }

  /** Puts a batch that could not be written back in line, merged by site and minute, bounded. */
  #keep(batch: PeriodTally[]): void {
    const merged = new Map<string, PeriodTally>();
    for (const item of [...batch, ...this.#pending]) {
      const key = `${item.siteId} ${item.at}`;
      const found = merged.get(key);
      if (found) addTally(found.tally, item.tally);
      else merged.set(key, item);
    }
    const oldest = Math.floor(this.#options.clock() / 1000) - MAX_PENDING_MINUTES * MINUTE;
    this.#pending = [...merged.values()].filter((item) => item.at >= oldest);
  }

  #schedule(): void {
    if (this.#closed) return;
    const { flushMs } = this.#options;
    // A second past the period's end, so the minute just over is whole when written.
    const delay = flushMs - (Date.now() % flushMs) + 1000;
    this.#timer = setTimeout(() => {
      // The minutes that are over; the current one waits for its end, unless flushes are more
      // frequent than minutes (then each writes what it has, for counts that show sooner).
      this.#rollOver(this.#minuteNow(), flushMs < MINUTE * 1000);
      void this.#write().finally(() => this.#schedule());
    }, delay);
    this.#timer.unref();
  }
}
