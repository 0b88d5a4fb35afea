// Bounds what one worker can put into its site's logs and into the host's memory: console lines
// (Log frames) and raw stdout/stderr share one budget per worker. Lines are cut at MAX_LOG_CHARS;
// past the budget they are dropped, and one marker line reports how many once the flood is over.
// Raw output is read no faster than its byte budget, so a flood blocks the worker, not the host.
import type { Readable } from 'node:stream';
import { type LogEntry, type LogLevel, MAX_LOG_CHARS } from './protocol.ts';

export interface OutputBudget {
  /** Lines stored per window. */
  lines: number;
  /** Characters stored per window. */
  chars: number;
  /** Raw output bytes read per window. */
  rawBytes: number;
  windowMs: number;
}

export const DEFAULT_OUTPUT_BUDGET: OutputBudget = {
  lines: 200,
  chars: 512 * 1024,
  rawBytes: 1024 * 1024,
  windowMs: 1000,
};

/** Past this many times the line budget in one window, the host stops reading the worker until the next. */
const FLOOD_FACTOR = 10;

export function truncateLine(text: string): string {
  return text.length > MAX_LOG_CHARS ? `${text.slice(0, MAX_LOG_CHARS)}… (truncated)` : text;
}

export class OutputLimit {
  readonly #budget: OutputBudget;
  readonly #emit: (entry: LogEntry) => void;
  readonly #now: () => number;
  #windowStart: number;
  #lines = 0;
  #chars = 0;
  #rawBytes = 0;
  /** Lines dropped since the flood began; a flood ends after a window within budget. */
  #dropped = 0;
  #watch: NodeJS.Timeout | undefined;

  constructor(budget: OutputBudget, emit: (entry: LogEntry) => void, now: () => number = Date.now) {
    this.#budget = budget;
    this.#emit = emit;
    this.#now = now;
    this.#windowStart = now();
  }

  /** Stores the line if the budget allows, cut to MAX_LOG_CHARS; counts it as dropped otherwise. */
  accept(entry: LogEntry): void {
    if (this.#admit(entry.message.length))
      this.#emit({ requestId: entry.requestId, level: entry.level, message: truncateLine(entry.message) });
  }

  /** The next line would be dropped: callers may count it with skip() without decoding it. */
  get dropping(): boolean {
    this.#roll();
    return this.#dropped > 0 || this.#lines >= this.#budget.lines || this.#chars > this.#budget.chars;
  }

  skip(): void {
    this.#admit(0);
  }

  /** So many lines arrived in this window that the sender should not be read until the next. */
  get flooded(): boolean {
    this.#roll();
    return this.#lines >= this.#budget.lines * FLOOD_FACTOR;
  }

  /** Counts raw output bytes; returns how long to stop reading (0: go on). */
  takeRaw(bytes: number): number {
    this.#roll();
    this.#rawBytes += bytes;
    return this.#rawBytes >= this.#budget.rawBytes ? this.msToNextWindow() : 0;
  }

  msToNextWindow(): number {
    return Math.max(1, this.#windowStart + this.#budget.windowMs - this.#now());
  }

  /** The worker is gone: report what was dropped. */
  close(): void {
    this.#endFlood();
  }

  #admit(chars: number): boolean {
    this.#roll();
    this.#lines++;
    this.#chars += Math.min(chars, MAX_LOG_CHARS);
    if (this.#dropped === 0 && this.#lines <= this.#budget.lines && this.#chars <= this.#budget.chars) return true;
    this.#dropped++;
    this.#watch ??= setInterval(() => this.#roll(), this.#budget.windowMs).unref();
    return false;
  }

  #roll(): void {
    const now = this.#now();
    const elapsed = now - this.#windowStart;
    if (elapsed < this.#budget.windowMs) return;
    const quiet =
      elapsed >= 2 * this.#budget.windowMs || (this.#lines <= this.#budget.lines && this.#chars <= this.#budget.chars);
    if (quiet) this.#endFlood();
    this.#windowStart = now - (elapsed % this.#budget.windowMs);
    this.#lines = 0;
    this.#chars = 0;
    this.#rawBytes = 0;
  }

  #endFlood(): void {
    clearInterval(this.#watch);
    this.#watch = undefined;
    if (this.#dropped === 0) return;
    const dropped = this.#dropped;
    this.#dropped = 0;
    this.#emit({
      requestId: null,
      level: 'warn',
      message: `… ${dropped} lines of output dropped (over ${this.#budget.lines} lines or ${this.#budget.chars} characters per second)`,
    });
  }
}

/** Longest raw line kept before decoding: MAX_LOG_CHARS characters of up to 4 UTF-8 bytes. */
const MAX_RAW_LINE_BYTES = MAX_LOG_CHARS * 4;

/**
 * Reads a worker's stdout or stderr line by line into `limit`, pausing the stream whenever the byte
 * budget of the window is spent; at most one line's head (MAX_RAW_LINE_BYTES) is buffered.
 */
export function readOutput(
  stream: Readable,
  level: LogLevel,
  limit: OutputLimit,
  rewrite: (line: string) => string,
): void {
  let parts: Buffer[] = [];
  let kept = 0;
  let cut = false;
  const endLine = () => {
    const line = parts;
    const truncated = cut;
    parts = [];
    kept = 0;
    cut = false;
    if (limit.dropping) return limit.skip();
    let text = Buffer.concat(line).toString('utf8');
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (truncated && text.length <= MAX_LOG_CHARS) text = `${text}… (truncated)`;
    limit.accept({ requestId: null, level, message: rewrite(text) });
  };
  const keep = (piece: Buffer) => {
    const room = MAX_RAW_LINE_BYTES - kept;
    if (piece.length > room) cut = true;
    if (room <= 0) return;
    const part = piece.subarray(0, room);
    parts.push(part);
    kept += part.length;
  };
  stream.on('data', (chunk: Buffer) => {
    for (let start = 0; start < chunk.length; ) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        keep(chunk.subarray(start));
        break;
      }
      keep(chunk.subarray(start, newline));
      endLine();
      start = newline + 1;
    }
    const wait = limit.takeRaw(chunk.length);
    if (wait > 0) {
      stream.pause();
      setTimeout(() => stream.resume(), wait);
    }
  });
  stream.on('end', () => {
    if (kept > 0 || cut) endLine();
  });
}
