// A minimal POSIX ustar writer and a strict reader, for Berth's backup archives: regular files only,
// written in order and hashed on the way. Sizes past ustar's 8 GiB use GNU's base-256 field, which
// GNU tar and bsdtar read, so an archive can still be listed with `tar tvf`.
//
// The reader is strict on purpose: every header's checksum, every padding byte and the end of the
// archive are checked, so with the SHA-256 of every member (checked by the caller against the
// manifest) no byte of an archive can change unnoticed.
import crypto from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';

const BLOCK = 512;
const OCTAL_SIZE_LIMIT = 8 ** 11;
/** Writes are gathered into chunks of this size before they reach the disk. */
const WRITE_CHUNK = 1024 * 1024;

export class TarFormatError extends Error {}

export interface WrittenMember {
  path: string;
  size: number;
  sha256: string;
}

function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  header.write(value.toString(8).padStart(length - 1, '0'), offset, length - 1, 'ascii');
  header[offset + length - 1] = 0;
}

/** A member's path as ustar holds it: up to 100 bytes in the name field, a longer one split at a slash into prefix and name. */
function splitName(name: string): { prefix: Buffer; name: Buffer } {
  const whole = Buffer.from(name, 'utf8');
  if (whole.length === 0) throw new Error('an archive member needs a name');
  if (whole.length <= 100) return { prefix: Buffer.alloc(0), name: whole };
  for (let slash = whole.indexOf(0x2f); slash !== -1; slash = whole.indexOf(0x2f, slash + 1)) {
    if (slash > 155) break;
    if (whole.length - slash - 1 <= 100 && slash > 0)
      return { prefix: whole.subarray(0, slash), name: whole.subarray(slash + 1) };
  }
  throw new Error(`archive member name too long: ${name}`);
}

function headerFor(name: string, size: number, mtimeSeconds: number): Buffer {
  const parts = splitName(name);
  const header = Buffer.alloc(BLOCK, 0);
  parts.name.copy(header, 0);
  parts.prefix.copy(header, 345);
  writeOctal(header, 100, 8, 0o600);
  writeOctal(header, 108, 8, 0);
  writeOctal(header, 116, 8, 0);
  if (size < OCTAL_SIZE_LIMIT) {
    writeOctal(header, 124, 12, size);
  } else {
    // GNU base-256: the high bit of the first byte, then the size big-endian in the other 11 bytes.
    header[124] = 0x80;
    let rest = BigInt(size);
    for (let i = 135; i > 124; i--) {
      header[i] = Number(rest & 0xffn);
      rest >>= 8n;
    }
  }
  writeOctal(header, 136, 12, mtimeSeconds);
  header.fill(0x20, 148, 156);
  header[156] = 0x30; // '0': a regular file
  header.write('ustar\u000000', 257, 8, 'latin1');
  const sum = header.reduce((total, byte) => total + byte, 0);
  header.write(`${sum.toString(8).padStart(6, '0')}\u0000 `, 148, 8, 'latin1');
  return header;
}

/** A file's bytes from its start, in chunks of WRITE_CHUNK: the source of a member read from disk. */
export async function* fileChunks(handle: FileHandle): AsyncIterable<Buffer> {
  let position = 0;
  for (;;) {
    const buffer = Buffer.allocUnsafe(WRITE_CHUNK);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) return;
    position += bytesRead;
    yield buffer.subarray(0, bytesRead);
  }
}

/** Appends regular files to an archive opened for writing; `finish()` writes its end. */
export class TarWriter {
  readonly #handle: FileHandle;
  readonly #mtime: number;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #written = 0;
  readonly #archiveHash = crypto.createHash('sha256');

  constructor(handle: FileHandle, mtime: Date) {
    this.#handle = handle;
    this.#mtime = Math.floor(mtime.getTime() / 1000);
  }

  /** Bytes of the archive so far. */
  get bytes(): number {
    return this.#written + this.#pendingBytes;
  }

  async #push(chunk: Buffer): Promise<void> {
    this.#pending.push(chunk);
    this.#pendingBytes += chunk.length;
    if (this.#pendingBytes >= WRITE_CHUNK) await this.#flush();
  }

  async #flush(): Promise<void> {
    if (this.#pendingBytes === 0) return;
    const data = Buffer.concat(this.#pending, this.#pendingBytes);
    this.#pending = [];
    this.#written += this.#pendingBytes;
    this.#pendingBytes = 0;
    this.#archiveHash.update(data);
    await this.#handle.write(data);
  }

  /**
   * Appends a member of exactly `size` bytes read from `source`; returns its SHA-256. A source that
   * yields more or fewer bytes than announced fails the archive (a file changed under us).
   */
  async add(name: string, size: number, source: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<WrittenMember> {
    await this.#push(headerFor(name, size, this.#mtime));
    const hash = crypto.createHash('sha256');
    let seen = 0;
    for await (const chunk of source) {
      seen += chunk.length;
      if (seen > size) throw new Error(`${name} grew while it was archived`);
      hash.update(chunk);
      await this.#push(chunk);
    }
    if (seen !== size) throw new Error(`${name} shrank while it was archived`);
    const padding = (BLOCK - (size % BLOCK)) % BLOCK;
    if (padding > 0) await this.#push(Buffer.alloc(padding, 0));
    return { path: name, size, sha256: hash.digest('hex') };
  }

  addBuffer(name: string, data: Buffer): Promise<WrittenMember> {
    return this.add(name, data.length, [data]);
  }

  /** Writes the two zero blocks that end an archive and flushes; the caller syncs and closes. Returns the archive's SHA-256. */
  async finish(): Promise<string> {
    await this.#push(Buffer.alloc(2 * BLOCK, 0));
    await this.#flush();
    return this.#archiveHash.digest('hex');
  }
}

/** Reads a file handle front to back in large chunks. */
class SequentialReader {
  readonly #handle: FileHandle;
  #buffer = Buffer.alloc(0);
  #position = 0;
  #eof = false;

  constructor(handle: FileHandle) {
    this.#handle = handle;
  }

  async #fill(wanted: number): Promise<void> {
    while (this.#buffer.length < wanted && !this.#eof) {
      const chunk = Buffer.allocUnsafe(WRITE_CHUNK);
      const { bytesRead } = await this.#handle.read(chunk, 0, chunk.length, this.#position);
      if (bytesRead === 0) {
        this.#eof = true;
        break;
      }
      this.#position += bytesRead;
      this.#buffer =
        this.#buffer.length === 0
          ? chunk.subarray(0, bytesRead)
          : Buffer.concat([this.#buffer, chunk.subarray(0, bytesRead)]);
    }
  }

  /** Exactly `length` bytes, or fewer at the end of the file. */
  async read(length: number): Promise<Buffer> {
    await this.#fill(length);
    const out = this.#buffer.subarray(0, length);
    this.#buffer = this.#buffer.subarray(out.length);
    return out;
  }

  /** Up to `max` bytes, whatever is at hand (at least one unless at the end). */
  async readSome(max: number): Promise<Buffer> {
    await this.#fill(1);
    const out = this.#buffer.subarray(0, Math.min(max, this.#buffer.length));
    this.#buffer = this.#buffer.subarray(out.length);
    return out;
  }
}

function parseOctal(field: Buffer, name: string): number {
  const text = field
    .toString('latin1')
    .replace(/[\0 ]+$/, '')
    .replace(/^ +/, '');
  if (!/^[0-7]+$/.test(text)) throw new TarFormatError(`bad ${name} field in an archive header`);
  return parseInt(text, 8);
}

function parseSize(field: Buffer): number {
  if ((field[0]! & 0x80) !== 0) {
    let value = 0n;
    for (let i = 1; i < field.length; i++) value = (value << 8n) | BigInt(field[i]!);
    if (field[0] !== 0x80 || value > BigInt(Number.MAX_SAFE_INTEGER))
      throw new TarFormatError('bad size field in an archive header');
    return Number(value);
  }
  return parseOctal(field, 'size');
}

function parseHeader(header: Buffer): { name: string; size: number } {
  const stored = parseOctal(header.subarray(148, 156), 'checksum');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
  if (sum !== stored) throw new TarFormatError('an archive header fails its checksum');
  if (header.subarray(257, 263).toString('latin1') !== 'ustar\u0000') throw new TarFormatError('not a ustar archive');
  const type = header[156];
  if (type !== 0x30 && type !== 0) throw new TarFormatError('the archive holds something other than regular files');
  const cString = (from: number, length: number) => {
    const field = header.subarray(from, from + length);
    const end = field.indexOf(0);
    return field.subarray(0, end === -1 ? length : end).toString('utf8');
  };
  const prefix = cString(345, 155);
  const name = prefix ? `${prefix}/${cString(0, 100)}` : cString(0, 100);
  return { name, size: parseSize(header.subarray(124, 136)) };
}

export interface MemberSink {
  /** Receives the member's bytes in order. */
  write(chunk: Buffer): Promise<void> | void;
}

/**
 * Reads an archive member by member. For each, `open(name, size)` returns where its bytes go; the
 * result of reading it is its SHA-256. Throws TarFormatError on any malformed or altered structure.
 */
export async function readTar(
  handle: FileHandle,
  open: (name: string, size: number) => Promise<MemberSink> | MemberSink,
  done: (member: WrittenMember) => Promise<void> | void,
): Promise<void> {
  const reader = new SequentialReader(handle);
  for (;;) {
    const header = await reader.read(BLOCK);
    if (header.length < BLOCK) throw new TarFormatError('the archive is truncated');
    if (header.every((byte) => byte === 0)) break;
    const { name, size } = parseHeader(header);
    const sink = await open(name, size);
    const hash = crypto.createHash('sha256');
    let left = size;
    while (left > 0) {
      const chunk = await reader.readSome(Math.min(left, WRITE_CHUNK));
      if (chunk.length === 0) throw new TarFormatError('the archive is truncated');
      hash.update(chunk);
      await sink.write(chunk);
      left -= chunk.length;
    }
    const padding = (BLOCK - (size % BLOCK)) % BLOCK;
    const pad = await reader.read(padding);
    if (pad.length < padding) throw new TarFormatError('the archive is truncated');
    if (!pad.every((byte) => byte === 0)) throw new TarFormatError('the archive has altered bytes between members');
    await done({ path: name, size, sha256: hash.digest('hex') });
  }
  // The end: a second zero block, then nothing but zeros (some writers pad to a record size).
  const second = await reader.read(BLOCK);
  if (second.length < BLOCK) throw new TarFormatError('the archive is truncated');
  for (let chunk = second; chunk.length > 0; chunk = await reader.readSome(WRITE_CHUNK)) {
    if (!chunk.every((byte) => byte === 0)) throw new TarFormatError('the archive has altered bytes after its end');
  }
}
