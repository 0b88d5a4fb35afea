// The SHA-256 of file versions this machine uploaded or read before. File listings carry a version id
// and a size but no digest, and a version's bytes never change, so an entry can never go stale: it
// only spares downloading a file of the same size to learn whether it changed.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export class DigestCache {
  readonly #file: string;
  #digests: Map<string, string>;

  private constructor(file: string, digests: Map<string, string>) {
    this.#file = file;
    this.#digests = digests;
  }

  /** The cache of one bucket, under $XDG_CACHE_HOME/berth (default ~/.cache/berth). */
  static async open(bucketId: string, env: NodeJS.ProcessEnv = process.env): Promise<DigestCache> {
    const base = env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
    const file = path.join(base, 'berth', 'digests', `${bucketId}.json`);
    let digests = new Map<string, string>();
    try {
      digests = new Map(Object.entries(JSON.parse(await fs.readFile(file, 'utf8')) as Record<string, string>));
    } catch {
      // No cache yet, or an unreadable one: start empty; digests are then learnt by reading the files.
    }
    return new DigestCache(file, digests);
  }

  get(versionId: string): string | undefined {
    return this.#digests.get(versionId);
  }

  set(versionId: string, sha256: string): void {
    this.#digests.set(versionId, sha256);
  }

  /** Keeps the given versions only (the bucket's current ones), so the file stays the bucket's size. */
  async save(current: Iterable<string>): Promise<void> {
    const keep = new Set(current);
    const entries = [...this.#digests].filter(([version]) => keep.has(version));
    this.#digests = new Map(entries);
    const temp = `${this.#file}.${process.pid}.tmp`;
    try {
      await fs.mkdir(path.dirname(this.#file), { recursive: true });
      await fs.writeFile(temp, JSON.stringify(Object.fromEntries(entries)));
      await fs.rename(temp, this.#file);
    } catch {
      // A cache that cannot be written costs the next deploy some reads, nothing more.
      await fs.rm(temp, { force: true });
    }
  }
}
