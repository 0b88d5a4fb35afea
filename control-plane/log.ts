// The process logger: JSON lines on stdout. Nothing secret is ever passed to it.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'berth' }, timestamp: pino.stdTimeFunctions.isoTime });
}
