// The process logger: JSON lines on stdout. Nothing secret is ever passed to it. Writes are buffered
// asynchronously, so lines that arrive while a write is in progress go out together, and flushed on
// shutdown.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino(
    { level, base: { service: 'berth' }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ dest: 1, sync: false }),
  );
}
