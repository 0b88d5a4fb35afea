// The process logger: JSON lines on stdout, or readable lines (pino-pretty) when stdout is a terminal.
// Nothing secret is ever passed to it. The JSON lines of one turn of the event loop leave in one
// write, so a busy server makes one write for many requests while each line still shows at once;
// writes are asynchronous, and flushed on shutdown. The one line of every request, the most frequent
// by far, is assembled directly in pino's format rather than by pino's general serialiser.
import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** Where the lines go: pino's asynchronous file destination, or a test's sink. */
export interface LineSink {
  write(text: string): void;
  flush(cb?: (err?: Error) => void): void;
}

/** Gathers the lines written during a turn of the event loop and hands them on together. */
class TurnBatcher implements DestinationStream {
  readonly #out: LineSink;
  #lines: string[] = [];
  #scheduled = false;

  constructor(out: LineSink) {
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

/** The loggers createLogger made with JSON lines, and where their lines go. */
const jsonLines = new WeakMap<Logger, TurnBatcher>();

/** A logger of `level`: readable lines on a terminal, else JSON lines to `sink` (stdout by default). */
export function createLogger(level: string, terminal = process.stdout.isTTY === true, sink?: LineSink): Logger {
  const options = { level, base: { service: 'berth' }, timestamp: isoTime };
  if (terminal)
    return pino(
      options,
      pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'service,pid,hostname', singleLine: true }),
    );
  const out = new TurnBatcher(sink ?? pino.destination({ dest: 1, sync: false }));
  const logger = pino(options, out);
  jsonLines.set(logger, out);
  return logger;
}

export interface RequestLine {
  reqId: string;
  kind: 'api' | 'site';
  /** The site's subdomain, for site requests. */
  host?: string | undefined;
  method: string;
  /** Without the query string, which may carry tokens. */
  path: string;
  status: number;
  /** The client's address (the proxy's report of it behind a trusted proxy). */
  ip: string;
  /** How long the answer took, in milliseconds. */
  ms: number;
}

/**
 * Logs a finished request at info level: the same line `log.info(line, 'request')` writes, byte for
 * byte, built without pino's general serialiser on loggers from createLogger. pino writes a string
 * as JSON.stringify does; a request's strings come from Node's HTTP parser, so they hold no lone
 * surrogate, the one case where the two could differ.
 */
export function logRequest(log: Logger, line: RequestLine): void {
  const out = jsonLines.get(log);
  if (out === undefined) {
    log.info(line, 'request');
    return;
  }
  if (!log.isLevelEnabled('info')) return;
  const host = line.host === undefined ? '' : `,"host":${JSON.stringify(line.host)}`;
  out.write(
    `{"level":30${isoTime()},"service":"berth","reqId":${JSON.stringify(line.reqId)},"kind":"${line.kind}"${host},"method":${JSON.stringify(line.method)},"path":${JSON.stringify(line.path)},"status":${line.status},"ip":${JSON.stringify(line.ip)},"ms":${line.ms},"msg":"request"}\n`,
  );
}
