// Password hashing with scrypt (Node's own, memory-hard): a random salt per password, parameters
// stored with the hash so they can be raised later, comparison in constant time.
import crypto from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(crypto.scrypt) as (
  password: string,
  salt: Buffer,
  keylen: number,
  options: crypto.ScryptOptions,
) => Promise<Buffer>;

/** 2^15 iterations, 32 MiB of memory per hash: about 50 ms here, and costly to guess at scale. */
const PARAMS = { N: 2 ** 15, r: 8, p: 1 };
const KEY_BYTES = 32;
const MAX_MEMORY = 64 * 1024 * 1024;

export const MIN_PASSWORD_CHARS = 10;
export const MAX_PASSWORD_CHARS = 1024;

export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, KEY_BYTES, { ...PARAMS, maxmem: MAX_MEMORY });
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** Whether `password` matches `stored`; a malformed or missing hash never matches, in the same time. */
export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = (stored ?? DECOY).split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return verifyPassword(password, DECOY).then(() => false);
  const expected = Buffer.from(hash, 'base64url');
  const actual = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: MAX_MEMORY,
  });
  return stored !== null && crypto.timingSafeEqual(actual, expected);
}

/** Hashed against when there is no user or no password, so that answer takes as long as a wrong one. */
const DECOY = `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${crypto.randomBytes(16).toString('base64url')}$${crypto.randomBytes(KEY_BYTES).toString('base64url')}`;
