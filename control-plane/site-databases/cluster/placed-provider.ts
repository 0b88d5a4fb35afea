// Site databases across nodes: each lives on the node its metadata row names (databases.node_id), and
// this provider sends every call to that node, its own provider when it is this one and a peer call
// (peer-client.ts) otherwise. Placements are cached and forgotten when a database changes (the change feed), so
// a call costs no metadata query; a node that answers that it no longer holds a database makes the
// call look its placement up again once.
import type { Knex } from 'knex';
import type { Change, ChangeListener } from '../../db/changes.ts';
import { parseDatabaseName } from '../branch-names.ts';
import {
  type Access,
  type BranchMade,
  type Compaction,
  type Restore,
  type RestorePoints,
  type RunOptions,
  type SiteDatabaseProvider,
  type Statement,
  type StatementResult,
  StatementError,
} from '../provider.ts';
import { type Peers, MovedError } from './peer-client.ts';

/** Migrations may rebuild large tables and dumps read everything: as on the holding node. */
const LONG_CALL_MS = 10 * 60_000;

interface Placement {
  nodeId: string | null;
  address: string;
}

export interface PlacedSiteDatabasesOptions {
  db: Knex;
  nodeId: string;
  /** The databases in this node's data dir. */
  local: SiteDatabaseProvider;
  /** Calls to other nodes; null on a node with no cluster address, which reaches none. */
  peers: Peers | null;
  statementTimeoutMs: number;
}

export class PlacedSiteDatabases implements SiteDatabaseProvider, ChangeListener {
  readonly #options: PlacedSiteDatabasesOptions;
  readonly #placements = new Map<string, Placement | null>();

  constructor(options: PlacedSiteDatabasesOptions) {
    this.#options = options;
  }

  /** Forgets where a site's database is (it was created, moved or removed). */
  forget(siteId: string): void {
    this.#placements.delete(siteId);
  }

  forgetAll(): void {
    this.#placements.clear();
  }

  /** The change feed's listener: a database that changed may have moved. */
  change(change: Change): void {
    if (change.kind === 'database') this.forget(change.siteId);
  }

  resync(): void {
    this.forgetAll();
  }

  /** Where the metadata places the site's database: on this node, on another, or nowhere (it has none). */
  async whereIs(siteId: string): Promise<'here' | 'elsewhere' | 'none'> {
    const placement = await this.#placement(siteId);
    return placement === null ? 'none' : this.#isHere(placement) ? 'here' : 'elsewhere';
  }

  /**
   * Where the site's database is, as a node another node called about it sees it: one it does not take
   * to be its own is looked up again, so a placement cached from before a move does not send a caller
   * away from the node that now holds it.
   */
  async whereIsForCaller(siteId: string): Promise<'here' | 'elsewhere' | 'none'> {
    const where = await this.whereIs(siteId);
    if (where === 'here') return where;
    this.forget(siteId);
    return this.whereIs(siteId);
  }

  async #placement(siteId: string): Promise<Placement | null> {
    if (this.#placements.has(siteId)) return this.#placements.get(siteId)!;
    const row = (await this.#options
      .db('databases')
      .leftJoin('nodes', 'nodes.id', 'databases.node_id')
      .where('databases.site_id', siteId)
      .first('databases.node_id as nodeId', 'nodes.address as address')) as
      | { nodeId: string | null; address: string | null }
      | undefined;
    const placement = row ? { nodeId: row.nodeId, address: row.address ?? '' } : null;
    if (this.#placements.size >= 10_000) this.#placements.clear();
    this.#placements.set(siteId, placement);
    return placement;
  }

  /** A database with no placement yet is one made before nodes were recorded: where its files are. */
  #isHere(placement: Placement | null): boolean {
    return placement === null || placement.nodeId === null || placement.nodeId === this.#options.nodeId;
  }

  /** Runs `local` here, or `remote` on the node that holds the database. */
  async #route<T>(
    siteId: string,
    local: (provider: SiteDatabaseProvider) => Promise<T>,
    remote: (peers: Peers, address: string) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const placement = await this.#placement(siteId);
      try {
        if (this.#isHere(placement)) return await local(this.#options.local);
        const { peers } = this.#options;
        if (!peers || !placement!.address)
          throw new StatementError(
            'unavailable',
            'the site\u2019s database is on another node, which this node cannot reach (one of them has no BERTH_CLUSTER_ADDRESS)',
          );
        return await remote(peers, placement!.address);
      } catch (err) {
        // Moved away from where it was looked for (here, or the node asked): look again, once.
        const moved = err instanceof MovedError || (err instanceof StatementError && err.reason === 'moved');
        if (!moved) throw err;
        if (attempt > 0)
          throw new StatementError('unavailable', 'the site\u2019s database is being moved; try again shortly');
        this.forget(siteId);
      }
    }
  }

  create(siteId: string): Promise<void> {
    return this.#route(
      siteId,
      (p) => p.create(siteId),
      (c, a) => c.call(a, siteId, 'create', {}, this.#options.statementTimeoutMs),
    );
  }

  // A branch of a site's database is where the database is: its calls go there, named by site and branch.

  run(name: string, statement: Statement, access: Access, options: RunOptions = {}): Promise<StatementResult> {
    const { siteId, branch } = parseDatabaseName(name);
    return this.#route(
      siteId,
      (p) => p.run(name, statement, access, options),
      (c, a) =>
        c.call(
          a,
          siteId,
          'run',
          { statement, access, readsOnly: options.readsOnly === true, ...(branch ? { branch } : {}) },
          this.#options.statementTimeoutMs,
        ),
    );
  }

  batch(name: string, statements: Statement[], access: Access): Promise<StatementResult[]> {
    const { siteId, branch } = parseDatabaseName(name);
    return this.#route(
      siteId,
      (p) => p.batch(name, statements, access),
      (c, a) =>
        c.call(
          a,
          siteId,
          'batch',
          { statements, access, ...(branch ? { branch } : {}) },
          this.#options.statementTimeoutMs,
        ),
    );
  }

  migrate(name: string, sql: string, receipt: Statement): Promise<void> {
    const { siteId, branch } = parseDatabaseName(name);
    return this.#route(
      siteId,
      (p) => p.migrate(name, sql, receipt),
      (c, a) => c.call(a, siteId, 'migrate', { sql, receipt, ...(branch ? { branch } : {}) }, LONG_CALL_MS),
    );
  }

  makeBranch(name: string, at: Date, orNow: boolean): Promise<BranchMade> {
    const { siteId, branch } = parseDatabaseName(name);
    return this.#route(
      siteId,
      (p) => p.makeBranch(name, at, orNow),
      (c, a) => c.call(a, siteId, 'makeBranch', { branch: branch!, at: at.toISOString(), orNow }, LONG_CALL_MS),
    );
  }

  dropBranch(name: string): Promise<void> {
    const { siteId, branch } = parseDatabaseName(name);
    return this.#route(
      siteId,
      (p) => p.dropBranch(name),
      (c, a) => c.call(a, siteId, 'dropBranch', { branch: branch! }, this.#options.statementTimeoutMs),
    );
  }

  dump(siteId: string, file: string): Promise<number> {
    return this.#route(
      siteId,
      (p) => p.dump(siteId, file),
      (c, a) => c.dump(a, siteId, file, LONG_CALL_MS),
    );
  }

  compact(siteId: string): Promise<Compaction> {
    return this.#route(
      siteId,
      (p) => p.compact(siteId),
      (c, a) => c.call(a, siteId, 'compact', {}, LONG_CALL_MS),
    );
  }

  restorePoints(siteId: string): Promise<RestorePoints> {
    return this.#route(
      siteId,
      (p) => p.restorePoints(siteId),
      (c, a) => c.call(a, siteId, 'restorePoints', {}, LONG_CALL_MS),
    );
  }

  restore(siteId: string, at: Date): Promise<Restore> {
    return this.#route(
      siteId,
      (p) => p.restore(siteId, at),
      (c, a) => c.call(a, siteId, 'restore', { at: at.toISOString() }, LONG_CALL_MS),
    );
  }

  size(name: string): Promise<number> {
    const { siteId, branch } = parseDatabaseName(name);
    return this.#route(
      siteId,
      (p) => p.size(name),
      (c, a) => c.call(a, siteId, 'size', branch ? { branch } : {}, this.#options.statementTimeoutMs),
    );
  }

  /** Removal follows the deletion of the placement row, so it is sent to the node that held it. */
  async remove(siteId: string, heldBy?: string | null): Promise<void> {
    if (!heldBy || heldBy === this.#options.nodeId) return this.#options.local.remove(siteId);
    const node = (await this.#options.db('nodes').where({ id: heldBy }).first('address')) as
      | { address: string }
      | undefined;
    if (!this.#options.peers || !node?.address)
      throw new StatementError('unavailable', 'the node that held the database cannot be reached to remove its file');
    await this.#options.peers.call(node.address, siteId, 'remove', {}, this.#options.statementTimeoutMs);
  }

  /** Only a database served here gets lines; the workers of one on another node call through the host. */
  async openLine(
    siteId: string,
    link: string,
    token: string,
    onCalls: (calls: Record<string, number>) => void,
  ): Promise<boolean> {
    if (!this.#isHere(await this.#placement(siteId))) return false;
    return this.#options.local.openLine(siteId, link, token, onCalls);
  }

  lineLost(siteId: string, token: string): Promise<StatementError> {
    return this.#options.local.lineLost(siteId, token);
  }

  closeLines(siteId?: string): Promise<void> {
    return this.#options.local.closeLines(siteId);
  }

  get lineCalls(): number {
    return this.#options.local.lineCalls;
  }

  async close(): Promise<void> {
    this.#options.peers?.close();
    await this.#options.local.close();
  }
}
