// What a database error means, whichever backend raised it.

/** A UNIQUE or PRIMARY KEY constraint refused the write: another writer got there first. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Socket errors of a connection to the database server (a file's ENOENT has syscall open or stat). */
const CONNECTION_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
const SOCKET_SYSCALLS = new Set(['connect', 'read', 'write', 'getaddrinfo']);

/** What `pg` and Knex say when a connection could not be had or was lost mid-query. */
const CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
];

/**
 * The metadata server cannot be used just now (down, restarting, unreachable, out of connections, or
 * too slow for a statement's deadline): the request may succeed later, and nothing it wrote committed.
 * SQLSTATE class 08 is connection exceptions; 57P01–57P03 an administrator's shutdown or a server
 * starting up; 53300 too many connections; 57014 a statement cancelled at its timeout.
 */
export function isMetadataUnavailable(err: unknown): boolean {
  const e = (err ?? {}) as { code?: unknown; syscall?: unknown; message?: unknown; name?: unknown };
  if (typeof e.code === 'string') {
    if (e.code.startsWith('08') && e.code.length === 5) return true;
    if (['57P01', '57P02', '57P03', '53300', '57014'].includes(e.code)) return true;
    if (
      typeof e.syscall === 'string' &&
      SOCKET_SYSCALLS.has(e.syscall) &&
      (CONNECTION_ERRNOS.has(e.code) || (e.code === 'ENOENT' && e.syscall === 'connect'))
    )
      return true;
  }
  if (e.name === 'KnexTimeoutError') return true;
  return typeof e.message === 'string' && CONNECTION_MESSAGES.some((text) => (e.message as string).startsWith(text));
}

/**
 * Logs a failure of work no request waits on (a cron tick, a log flush, a sweep): an outage of the
 * metadata server is a warning with its reason, anything else an error with its stack.
 */
export function logJobFailure(
  log: { warn(fields: object, msg: string): void; error(fields: object, msg: string): void },
  err: unknown,
  what: string,
  fields: object = {},
): void {
  if (isMetadataUnavailable(err))
    log.warn({ ...fields, reason: (err as Error).message }, `${what}: the metadata database did not answer`);
  else log.error({ ...fields, err }, what);
}
