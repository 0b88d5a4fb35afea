// The local site database provider: one SQLite file per site at <data dir>/sites/<siteId>/db.sqlite,
// each opened by a Deno process of its own (database-process.ts) that SQLite and Deno confine to that
// file. Processes start on first use, stay warm while used, and are capped and evicted like function
// workers. It implements the provider interface (provider.ts) that a networked SQL provider would
// implement too; nothing outside this folder knows the databases are local files.
// This class ties its parts in local/: the processes (site-processes.ts), the calls as the host runs
// them (calls.ts), the workers' lines (worker-lines.ts), the hand-over between nodes (moves.ts),
// what the replicas give back (restores.ts) and the branches made of the databases (branches.ts).
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Access, Census, Compaction, Statement } from './protocol.ts';
import type {
  BranchMade,
  FrozenDatabase,
  Restore,
  RestorePoints,
  RunOptions,
  SiteDatabaseProvider,
  StatementError,
  StatementResult,
} from './provider.ts';
import { Branches } from './local/branches.ts';
import { SiteCalls } from './local/calls.ts';
import { DatabaseMoves } from './local/moves.ts';
import type { SiteDatabaseOptions } from './local/options.ts';
import { Restores } from './local/restores.ts';
import { SiteProcesses } from './local/site-processes.ts';
import { WorkerLines } from './local/worker-lines.ts';

export class SiteDatabases implements SiteDatabaseProvider {
  readonly #options: SiteDatabaseOptions;
  readonly #processes: SiteProcesses;
  readonly #calls: SiteCalls;
  readonly #lines: WorkerLines;
  readonly #moves: DatabaseMoves;
  readonly #restores: Restores;
  readonly #branches: Branches;

  constructor(options: SiteDatabaseOptions) {
    this.#options = options;
    this.#processes = new SiteProcesses(options, {
      onStats: (siteId, stats) => this.#lines.stats(siteId, stats),
      onExit: (process) => this.#lines.forget(process),
    });
    this.#calls = new SiteCalls(options, this.#processes, (siteId) => this.#lines.close(siteId));
    this.#lines = new WorkerLines(options, this.#processes, this.#calls);
    this.#moves = new DatabaseMoves(options, this.#processes, this.#calls);
    this.#restores = new Restores(options, this.#processes, this.#calls, this.#moves);
    this.#branches = new Branches(options, this.#processes);
  }

  // The calls (local/calls.ts).

  create(siteId: string): Promise<void> {
    return this.#calls.create(siteId);
  }

  run(siteId: string, statement: Statement, access: Access, options: RunOptions = {}): Promise<StatementResult> {
    return this.#calls.run(siteId, statement, access, options);
  }

  batch(siteId: string, statements: Statement[], access: Access): Promise<StatementResult[]> {
    return this.#calls.batch(siteId, statements, access);
  }

  migrate(siteId: string, sql: string, receipt: Statement): Promise<void> {
    return this.#calls.migrate(siteId, sql, receipt);
  }

  dump(siteId: string, file: string): Promise<number> {
    return this.#calls.dump(siteId, file);
  }

  compact(siteId: string): Promise<Compaction> {
    return this.#calls.compact(siteId);
  }

  async size(siteId: string): Promise<number> {
    const sizes = await Promise.all(
      ['db.sqlite', 'db.sqlite-wal'].map((name) =>
        fsp.stat(path.join(this.#processes.dir(siteId), name)).then(
          (s) => s.size,
          () => 0,
        ),
      ),
    );
    return sizes[0]! + sizes[1]!;
  }

  /** The database is deleted: its file goes, its branches, and its replica (its history) with it. */
  async remove(siteId: string): Promise<void> {
    await this.dropCopy(siteId);
    await this.#branches.dropAllOf(siteId);
    await this.#options.replicas?.discard(siteId);
  }

  /**
   * Stops serving every database: calls answer `unavailable` from now on, the processes stop (a call
   * in flight ends with them, uncommitted), and the replicator ships what it has and stops.
   */
  async fence(): Promise<void> {
    this.#calls.fenced = true;
    await this.#processes.stopAll();
    await this.#options.replicas?.replicator.suspend();
  }

  /** Serves again (the caller has set aside what was taken over meanwhile). */
  unfence(): void {
    this.#calls.fenced = false;
    this.#options.replicas?.replicator.resume();
  }

  close(): Promise<void> {
    return this.#processes.close();
  }

  /** The site's database file. */
  fileOf(siteId: string): string {
    return this.#processes.fileOf(siteId);
  }

  // What the replicas give back (local/restores.ts).

  resumeReplication(): Promise<number> {
    return this.#restores.resumeReplication();
  }

  recoverFromReplica(siteId: string): Promise<{ census: Census; replicatedAt: Date } | null> {
    return this.#restores.recoverFromReplica(siteId);
  }

  restorePoints(siteId: string): Promise<RestorePoints> {
    return this.#restores.restorePoints(siteId);
  }

  restore(siteId: string, at: Date): Promise<Restore> {
    return this.#restores.restore(siteId, at);
  }

  // The branches (local/branches.ts).

  makeBranch(name: string, at: Date, orNow: boolean): Promise<BranchMade> {
    return this.#branches.make(name, at, orNow);
  }

  dropBranch(name: string): Promise<void> {
    return this.#branches.drop(name);
  }

  /** The branches this node has, by name. */
  branchesHere(): Promise<string[]> {
    return this.#branches.here();
  }

  /** Removes what makes of branches a stopped server cut short left. */
  dropBranchLeftovers(): Promise<void> {
    return this.#branches.dropLeftovers();
  }

  // The hand-over between nodes (local/moves.ts).

  freeze(siteId: string): Promise<FrozenDatabase> {
    return this.#moves.freeze(siteId);
  }

  incoming(siteId: string): Promise<string> {
    return this.#moves.incoming(siteId);
  }

  discardIncoming(dir: string): Promise<void> {
    return this.#moves.discardIncoming(dir);
  }

  install(siteId: string, dir: string): Promise<Census> {
    return this.#moves.install(siteId, dir);
  }

  dropCopy(siteId: string): Promise<void> {
    return this.#moves.dropCopy(siteId);
  }

  // The workers' lines (local/worker-lines.ts).

  openLine(
    siteId: string,
    link: string,
    token: string,
    onCalls: (calls: Record<string, number>) => void,
  ): Promise<boolean> {
    return this.#lines.open(siteId, link, token, onCalls);
  }

  lineLost(siteId: string, token: string): Promise<StatementError> {
    return this.#lines.lost(siteId, token);
  }

  closeLines(siteId?: string): Promise<void> {
    return this.#lines.close(siteId);
  }

  get lineCalls(): number {
    return this.#lines.calls;
  }

  /** Line tokens kept, so a worker whose line broke can learn why (at most maxLineTokens). */
  get lineTokens(): number {
    return this.#lines.tokens;
  }
}
