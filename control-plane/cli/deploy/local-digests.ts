// The SHA-256 of local files, remembered while their size and modification time stay the same: a
// watcher deploys the whole set on each change and reads again only the files that changed.
import { sha256File } from './digest.ts';
import type { LocalFile } from './local-files.ts';

export class LocalDigests {
  readonly #known = new Map<string, { bytes: number; mtimeMs: number; sha256: string }>();

  async of(file: LocalFile): Promise<string> {
    const known = this.#known.get(file.absolute);
    if (known && known.bytes === file.bytes && known.mtimeMs === file.mtimeMs) return known.sha256;
    const sha256 = await sha256File(file.absolute);
    this.#known.set(file.absolute, { bytes: file.bytes, mtimeMs: file.mtimeMs, sha256 });
    return sha256;
  }
}
