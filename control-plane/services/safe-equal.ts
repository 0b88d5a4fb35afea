// Comparison of secrets (signatures, codes) in constant time, for inputs of any length or encoding.
import crypto from 'node:crypto';

// Per-process key: the digests compared are unpredictable, so their timing says nothing of the inputs.
const key = crypto.randomBytes(32);
const digest = (value: string) => crypto.createHmac('sha256', key).update(value, 'utf8').digest();

/** True when `a` and `b` are the same string; never throws, whatever their lengths. */
export function safeEqual(a: string, b: string): boolean {
  return crypto.timingSafeEqual(digest(a), digest(b));
}
