// Litestream (v0.3.13, the Linux binary Fly.io publishes to the npm registry as
// @flydotio/litestream-linux-x64, an optional dependency of Berth), the engine that copies each site
// database's write-ahead log to its replica as it is written, and restores a database as it was at a
// moment from it. Everything Berth knows of the engine is here: where its binary is, the configuration
// it reads, the commands it runs and the text they print; a later engine replaces this module.
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';

/** Where a node's replicas go: a folder (one sub-folder per database) or a bucket of the object store. */
export type ReplicaTarget =
  | { kind: 'dir'; dir: string }
  | { kind: 's3'; bucket: string; prefix: string; endpoint?: string; region: string; forcePathStyle: boolean };

export interface ReplicationTiming {
  /** How long a database's history stays restorable. */
  retentionMs: number;
  /** A full copy of each database this often, so a restore replays at most this much of its log. */
  snapshotIntervalMs: number;
}

/** The binary of the engine for this machine, from its npm package. */
export function litestreamBinary(): string {
  const require = createRequire(import.meta.url);
  const pkg = `@flydotio/litestream-${process.platform}-${process.arch}`;
  try {
    return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'litestream');
  } catch {
    throw new Error(
      `database replication needs the Litestream binary for ${process.platform}-${process.arch} (npm package ${pkg}), which is not installed; BERTH_DATABASE_REPLICATION=false runs Berth without it (no time travel, no failover)`,
    );
  }
}

/** The folder or key prefix that holds one database's replica. */
export function replicaPlace(target: ReplicaTarget, siteId: string): string {
  return target.kind === 'dir' ? path.join(target.dir, siteId) : `${target.prefix}database-replicas/${siteId}`;
}

const seconds = (ms: number): string => `${Math.max(1, Math.round(ms / 1000))}s`;

function replicaConfig(target: ReplicaTarget, siteId: string, timing: ReplicationTiming): Record<string, unknown> {
  const where: Record<string, unknown> =
    target.kind === 'dir'
      ? { type: 'file', path: replicaPlace(target, siteId) }
      : {
          type: 's3',
          bucket: target.bucket,
          path: replicaPlace(target, siteId),
          region: target.region,
          'force-path-style': target.forcePathStyle,
          ...(target.endpoint ? { endpoint: target.endpoint } : {}),
        };
  return {
    name: 'berth',
    ...where,
    'sync-interval': '1s',
    // The engine deletes what precedes the oldest snapshot younger than its retention: kept a snapshot
    // interval longer, the whole retention stays restorable.
    retention: seconds(timing.retentionMs + timing.snapshotIntervalMs),
    'snapshot-interval': seconds(timing.snapshotIntervalMs),
    'retention-check-interval': '1h',
    // Checked by restoring, which reads the whole replica: Berth's own tests and restores do that.
    'validation-interval': '0s',
  };
}

/**
 * Which generation a file of a replica belongs to (its name relative to the replica's place), and
 * whether it is a full copy of the database (a snapshot) or a segment of its log; null for anything else.
 */
export function replicaFileOf(name: string): { generation: string; snapshot: boolean } | null {
  const match = /^generations\/([0-9a-f]{16})\/(snapshots|wal)\//.exec(name.split(path.sep).join('/'));
  return match ? { generation: match[1]!, snapshot: match[2] === 'snapshots' } : null;
}

/** The folder of a generation in a replica's place (a folder, or a key prefix). */
export const generationPlace = (place: string, generation: string): string => `${place}/generations/${generation}`;

/**
 * Makes the engine begin a new generation of the database at its next start (a fresh full copy, and
 * the log from there), by removing what it keeps beside the database of the one it follows: its
 * shadow log and the generation's name. Only while no engine follows the database.
 */
export async function forgetGeneration(file: string): Promise<void> {
  await fsp.rm(path.join(path.dirname(file), `.${path.basename(file)}-litestream`), { recursive: true, force: true });
}

export interface ReplicatedDatabase {
  siteId: string;
  file: string;
}

/**
 * The engine's configuration for `databases` (JSON, which its YAML reader takes), with its metrics
 * served at `metricsAddress` (host:port): the replicator reads progress from them.
 */
export function litestreamConfig(
  databases: ReplicatedDatabase[],
  target: ReplicaTarget,
  timing: ReplicationTiming,
  metricsAddress = '',
): string {
  return JSON.stringify({
    ...(metricsAddress ? { addr: metricsAddress } : {}),
    logging: { type: 'json', level: 'warn', stderr: true },
    dbs: databases.map((db) => ({
      path: db.file,
      'monitor-interval': '1s',
      // It alone checkpoints (the database processes leave it to the engine): soon after a write, so
      // the pages a database gave back leave its file within seconds.
      'checkpoint-interval': '10s',
      replicas: [replicaConfig(target, db.siteId, timing)],
    })),
  });
}

export interface Generation {
  generation: string;
  start: Date;
  end: Date;
}

/**
 * Runs one of the engine's commands about a single database's replica. The engine finds the replica
 * through a configuration naming a database file; it is given an empty stand-in for it, since the
 * database itself may not be on this node (a recovery) and is none of the command's business.
 */
async function command(
  args: string[],
  siteId: string,
  target: ReplicaTarget,
  timing: ReplicationTiming,
  workDir: string,
  timeoutMs: number,
): Promise<string> {
  await fsp.mkdir(workDir, { recursive: true, mode: 0o700 });
  const name = path.join(workDir, `litestream-${crypto.randomUUID()}`);
  const config = `${name}.json.tmp`;
  const standIn = `${name}.sqlite.tmp`;
  await fsp.writeFile(standIn, '', { mode: 0o600 });
  await fsp.writeFile(config, litestreamConfig([{ siteId, file: standIn }], target, timing), { mode: 0o600 });
  try {
    const result = await execa(litestreamBinary(), [...args, '-config', config, '-no-expand-env', standIn], {
      reject: false,
      timeout: timeoutMs,
      stdin: 'ignore',
    });
    if (result.exitCode !== 0 || result.timedOut)
      throw new Error(
        result.timedOut
          ? `litestream ${args[0]} did not finish within ${timeoutMs} ms`
          : `litestream ${args[0]} failed: ${lastLine(String(result.stderr))}`,
      );
    return String(result.stdout);
  } finally {
    await Promise.all([fsp.rm(config, { force: true }), fsp.rm(standIn, { force: true })]);
  }
}

/** The last thing the engine said, without its JSON wrapping, for an error message. */
function lastLine(stderr: string): string {
  const line = stderr.trim().split('\n').pop() ?? '';
  try {
    const parsed = JSON.parse(line) as { msg?: string; error?: string };
    return [parsed.msg, parsed.error].filter(Boolean).join(': ') || line;
  } catch {
    return line;
  }
}

/** The replica's generations: each a continuous stretch of the database's history, with its time bounds. */
export async function listGenerations(
  siteId: string,
  target: ReplicaTarget,
  timing: ReplicationTiming,
  workDir: string,
): Promise<Generation[]> {
  return parseGenerations(await command(['generations'], siteId, target, timing, workDir, 60_000));
}

/**
 * The generations the engine's `generations` command lists (a table: name, generation, lag, start, end).
 * A generation the engine has begun and not yet written a snapshot or log to holds nothing to restore:
 * it prints the zero time (0001-01-01) as its bounds, and is left out.
 */
export function parseGenerations(out: string): Generation[] {
  const generations: Generation[] = [];
  for (const line of out.split('\n').slice(1)) {
    const [, generation, , start, end] = line.trim().split(/\s+/);
    if (!generation || !start || !end) continue;
    const g = { generation, start: new Date(start), end: new Date(end) };
    if (g.start.getTime() > 0 && g.end.getTime() > 0) generations.push(g);
  }
  return generations;
}

/**
 * Restores the database from its replica into `out` (which must not exist): as of `at` within
 * `generation`, or that generation's latest state without `at`.
 */
export async function restoreReplica(
  siteId: string,
  target: ReplicaTarget,
  timing: ReplicationTiming,
  workDir: string,
  out: string,
  choice: { generation: string; at?: Date },
): Promise<void> {
  const args = ['restore', '-o', out, '-generation', choice.generation];
  if (choice.at) args.push('-timestamp', choice.at.toISOString());
  await command(args, siteId, target, timing, workDir, 10 * 60_000);
}
