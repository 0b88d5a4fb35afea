// The local provider's options, which each of its parts reads its own of.
import type { Access } from '../protocol.ts';
import type { SiteReplicas } from '../replication/site-replicas.ts';

export interface SiteDatabaseOptions {
  dataDir: string;
  denoPath: string;
  denoDir: string;
  /** Time limit of one statement or batch. */
  statementTimeoutMs: number;
  /** Live database processes at most; the least recently used idle one makes room. */
  maxProcesses: number;
  /** An idle database process is stopped after this long. */
  idleMs: number;
  /** A database may grow to this many bytes. */
  maxBytes: number;
  /** Told how long each statement or batch took, by whom it was run and whether it succeeded, for metrics. */
  onStatement?: (access: Access, ok: boolean, seconds: number) => void;
  /** The databases' replicas; null: not replicated (BERTH_DATABASE_REPLICATION=false). */
  replicas?: SiteReplicas | null;
  /**
   * Where database processes listen for their workers' lines (openLine) and workers' links to
   * them are made: the runtime's socket folder. None: workers' calls all come through the host.
   */
  lineDir?: string;
  /** Line tokens kept at most, the oldest going first (MAX_TOKENS when not given). */
  maxLineTokens?: number;
}
