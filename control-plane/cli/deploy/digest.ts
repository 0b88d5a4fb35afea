// SHA-256 of file contents, streamed so that large files are never held in memory.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { Writable } from 'node:stream';

export async function sha256File(file: string): Promise<string> {
  const hash = crypto.createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** A stream to pipe bytes into when only their digest is wanted. */
export class Sha256Sink extends Writable {
  readonly #hash = crypto.createHash('sha256');

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.#hash.update(chunk);
    done();
  }

  digest(): string {
    return this.#hash.digest('hex');
  }
}
