// The branches this node knows are made, so that a preview's database calls cost no metadata query
// each: forgotten when the site's database changes anywhere (a branch dropped or failed is published
// as such a change), and all of them on a resync of the change feed.
import type { Change, ChangeListener } from '../db/changes.ts';
import { siteOfDatabase } from '../site-databases/branch-names.ts';

/** Branches remembered at most; past it the memory starts again empty. */
const MAX_BRANCHES = 10_000;

export class ReadyBranches implements ChangeListener {
  /** Each ready branch's name, and when its use was last written (ms). */
  readonly #ready = new Map<string, number>();

  has(name: string): boolean {
    return this.#ready.has(name);
  }

  remember(name: string): void {
    if (this.#ready.size >= MAX_BRANCHES) this.#ready.clear();
    this.#ready.set(name, Date.now());
  }

  forget(name: string): void {
    this.#ready.delete(name);
  }

  /** Whether the branch's use is to be written again (`everyMs` since the last time); says it will be. */
  due(name: string, everyMs: number): boolean {
    const last = this.#ready.get(name);
    if (last === undefined || Date.now() - last < everyMs) return false;
    this.#ready.set(name, Date.now());
    return true;
  }

  change(change: Change): void {
    if (change.kind !== 'database') return;
    for (const name of this.#ready.keys()) if (siteOfDatabase(name) === change.siteId) this.#ready.delete(name);
  }

  resync(): void {
    this.#ready.clear();
  }
}
