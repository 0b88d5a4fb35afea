// Bearer secrets (API keys, session tokens, one-time links): 256 random bits, of which only a SHA-256
// digest is stored. With that much entropy a fast digest is enough: a copy of the metadata reveals no
// usable token, and there is nothing to brute-force that a slow hash would protect.
import crypto from 'node:crypto';

export const newToken = (): string => crypto.randomBytes(32).toString('base64url');

export const digestToken = (token: string): string => crypto.createHash('sha256').update(token).digest('hex');
