// Bucket paths are normalized once, here: no leading slash, no empty, "." or ".." segments, no
// backslash, NUL or other control characters. Anything else is rejected rather than guessed at.
import { BerthError } from '../errors.ts';

const MAX_PATH_BYTES = 1024;

/** Web paths that would shadow routes the hosting layer reserves for itself. */
const RESERVED_WEB_PREFIXES = ['web/api/', 'web/cron/', 'web/data/', 'web/_berth/'];

const invalidPath = (message: string) => new BerthError('invalid_path', message);

function check(path: string, what: string, allowTrailingSlash: boolean): string {
  if (typeof path !== 'string' || path.length === 0) throw invalidPath(`${what} must not be empty`);
  if (/[\u0000-\u001f\u007f]/.test(path)) throw invalidPath(`${what} must not contain NUL or control characters`);
  if (path.includes('\\')) throw invalidPath(`${what} must not contain a backslash`);
  const trimmed = path.startsWith('/') ? path.slice(1) : path;
  if (Buffer.byteLength(trimmed) > MAX_PATH_BYTES) throw invalidPath(`${what} must be at most ${MAX_PATH_BYTES} bytes`);
  const segments = trimmed.split('/');
  if (allowTrailingSlash && segments.length > 1 && segments.at(-1) === '') segments.pop();
  for (const segment of segments) {
    if (segment === '')
      throw invalidPath(`${what} must not contain empty segments ("//", a leading "//" or a trailing "/")`);
    if (segment === '.' || segment === '..') throw invalidPath(`${what} must not contain "." or ".." segments`);
  }
  return trimmed;
}

/** A file path such as "web/index.html"; one leading slash is accepted and removed. */
export function normalizeFilePath(path: string): string {
  return check(path, 'file path', false);
}

/** A listing prefix such as "web/" or "web/img"; a trailing slash is kept. */
export function normalizePrefix(prefix: string): string {
  return check(prefix, 'prefix', true);
}

/** Rejects uploads under web/ directories that the hosting layer reserves. */
export function assertWritablePath(path: string): void {
  const reserved = RESERVED_WEB_PREFIXES.find((prefix) => path.startsWith(prefix));
  if (reserved) {
    throw new BerthError(
      'reserved_path',
      `"${reserved}" is reserved for hosted routes; web files cannot be stored under it`,
    );
  }
}
