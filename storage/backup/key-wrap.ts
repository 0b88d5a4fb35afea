// The master key in a backup: wrapped with a passphrase (scrypt, then AES-256-GCM), or left out. Either
// way the manifest carries a fingerprint of the key (an HMAC under the key of a fixed text, which says
// nothing about the key), so a restore can tell a wrong key file or passphrase from the right one
// before it writes anything.
import crypto from 'node:crypto';

export const MASTER_KEY_BYTES = 32;
/** At least this many characters: the wrapped key is only as strong as its passphrase. */
export const MIN_PASSPHRASE_LENGTH = 12;

const AAD = Buffer.from('berth backup: master key, v1');
const FINGERPRINT_TEXT = 'berth backup: master key fingerprint, v1';

/** scrypt at N=2^17, r=8: 128 MiB and a fraction of a second per try, for the operator and for a guesser. */
const SCRYPT = { N: 2 ** 17, r: 8, p: 1 } as const;
/** What a restore accepts from an archive's parameters, so a crafted archive cannot ask for gigabytes. */
const MAX_SCRYPT_N = 2 ** 20;

export interface WrappedKey {
  kdf: 'scrypt';
  N: number;
  r: number;
  p: number;
  salt: string;
  cipher: 'aes-256-gcm';
  nonce: string;
  ciphertext: string;
  tag: string;
}

export class KeyWrapError extends Error {}

export function keyFingerprint(key: Buffer): string {
  return crypto.createHmac('sha256', key).update(FINGERPRINT_TEXT).digest('hex');
}

function derive(passphrase: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    crypto.scrypt(
      passphrase.normalize('NFC'),
      salt,
      32,
      { ...params, maxmem: 256 * params.N * params.r + 16 * 1024 * 1024 },
      (err, derived) => (err ? reject(err) : resolve(derived)),
    ),
  );
}

export async function wrapMasterKey(key: Buffer, passphrase: string): Promise<WrappedKey> {
  const salt = crypto.randomBytes(16);
  const nonce = crypto.randomBytes(12);
  const wrappingKey = await derive(passphrase, salt, SCRYPT);
  const cipher = crypto.createCipheriv('aes-256-gcm', wrappingKey, nonce);
  cipher.setAAD(AAD);
  const ciphertext = Buffer.concat([cipher.update(key), cipher.final()]);
  return {
    kdf: 'scrypt',
    ...SCRYPT,
    salt: salt.toString('base64'),
    cipher: 'aes-256-gcm',
    nonce: nonce.toString('base64'),
    ciphertext: ciphertext.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
  };
}

/** The master key, or a KeyWrapError when the passphrase does not open it. */
export async function unwrapMasterKey(wrapped: WrappedKey, passphrase: string): Promise<Buffer> {
  const { N, r, p } = wrapped;
  const sane = (n: unknown, max: number) => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= max;
  if (
    wrapped.kdf !== 'scrypt' ||
    wrapped.cipher !== 'aes-256-gcm' ||
    !sane(N, MAX_SCRYPT_N) ||
    (N & (N - 1)) !== 0 ||
    !sane(r, 32) ||
    !sane(p, 16)
  ) {
    throw new KeyWrapError('the wrapped master key uses parameters this Berth does not accept');
  }
  const wrappingKey = await derive(passphrase, Buffer.from(wrapped.salt, 'base64'), { N, r, p });
  const decipher = crypto.createDecipheriv('aes-256-gcm', wrappingKey, Buffer.from(wrapped.nonce, 'base64'));
  decipher.setAAD(AAD);
  decipher.setAuthTag(Buffer.from(wrapped.tag, 'base64'));
  let key: Buffer;
  try {
    key = Buffer.concat([decipher.update(Buffer.from(wrapped.ciphertext, 'base64')), decipher.final()]);
  } catch {
    throw new KeyWrapError('the passphrase does not open the master key in this backup');
  }
  if (key.length !== MASTER_KEY_BYTES) throw new KeyWrapError('the wrapped master key is not a 32-byte key');
  return key;
}
