// The instance's master key: 32 random bytes in a file of mode 0600 (BERTH_MASTER_KEY_FILE, by default
// <data dir>/master.key), made once. It encrypts secrets at rest (AES-256-GCM) and signs session tokens.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const KEY_BYTES = 32;

/** Loads the master key, creating it on first use; never replaces an existing one. */
export function loadMasterKey(file: string): Buffer {
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, crypto.randomBytes(KEY_BYTES), { mode: 0o600 });
    const handle = fs.openSync(tmp, 'r');
    fs.fsyncSync(handle);
    fs.closeSync(handle);
    try {
      // link fails if another process made the key first: theirs wins, ours is dropped.
      fs.linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  }
  const key = fs.readFileSync(file);
  if (key.length !== KEY_BYTES) throw new Error(`${file} is not a ${KEY_BYTES}-byte key; restore it from a backup`);
  return key;
}

/** Encrypts `plaintext`, binding it to `context` (e.g. site and name) so it cannot be moved. */
export function seal(key: Buffer, plaintext: string, context: string): string {
  const nonce = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(Buffer.from(context));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `v1:${nonce.toString('base64')}:${body.toString('base64')}`;
}

export function open(key: Buffer, sealed: string, context: string): string {
  const [version, nonce, body] = sealed.split(':');
  if (version !== 'v1' || !nonce || !body) throw new Error('unknown secret format');
  const bytes = Buffer.from(body, 'base64');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64'));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(bytes.subarray(bytes.length - 16));
  return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString('utf8');
}
