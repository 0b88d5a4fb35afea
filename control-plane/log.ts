// The process logger: JSON lines on stdout, or readable lines (pino-pretty) when stdout is a terminal.
// Nothing secret is ever passed to it. The JSON lines of one turn of the event loop leave in one
// write, so a busy server makes one write for many requests while each line still shows at once;
// writes are asynchronous, and flushed on shutdown.
import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** Gathers the lines written during a turn of the event loop and hands them on together. */
class TurnBatcher implements DestinationStream {
  readonly #out: ReturnType<typeof pino.destination>;
  #lines: string[] = [];
  #scheduled = false;

  constructor(out: ReturnType<typeof pino.destination>) {
    this.#out = out;
  }

  write(line: string): void {
    this.#lines.push(line);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.#drain());
  }

  /** What pino's `logger.flush(cb)` calls. */
  flush(cb?: (err?: Error) => void): void {
    this.#drain();
    this.#out.flush(cb);
  }

  #drain(): void {
    this.#scheduled = false;
    if (this.#lines.length === 0) return;
    const text = this.#lines.join('');
    this.#lines = [];
    this.#out.write(text);
  }
}

/** pino's ISO time, made once per millisecond rather than once per line: a busy server logs many per ms. */
let lastMs = 0;
let lastTime = '';
function isoTime(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastTime = `,"time":"${new Date(now).toISOString()}"`;
  }
  return lastTime;
}

export function createLogger(level: string, terminal = process.stdout.isTTY === true): Logger {
  const options = { level, base: { service: 'berth' }, timestamp: isoTime };
  if (terminal) return pino(options, pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'service,pid,hostname', singleLine: true }));
  return pino(options, new TurnBatcher(pino.destination({ dest: 1, sync: false })));
}
