// Peer calls, the node-to-node protocol, as both sides speak it: a node that does not hold a site's
// database sends the provider call (../provider.ts) to the node that does, which runs it on its own
// provider with the same limits and confinement as a local call and answers the same outcome. One
// signed POST per call (peer-auth.ts) to `/v1/site-databases/<site>/<operation>`, its request JSON,
// its answer JSON: `{ok: true, value}` or `{ok: false, reason, message}`. Moving a database (move.ts)
// uses three more: `move` asks the holding node to move it, `receive` carries the file to the new
// node, `recover` has a node take a lost node's database from its replica; `remove` also removes a copy
// that did not become the database. The caller (peer-client.ts) and the node called
// (peer-server.ts) both type each operation through PEER_CALLS, so that they cannot drift apart.
import { z } from 'zod';
import { isBranchId } from '../branch-names.ts';
import type {
  BranchMade,
  Census,
  Compaction,
  Restore,
  RestorePoints,
  StatementError,
  StatementResult,
} from '../provider.ts';

/** What the move of one database did, as the node that moved it reports it. */
export interface MoveReport {
  siteId: string;
  from: string;
  to: string;
  bytes: number;
  tables: number;
  rows: number;
  /** How long the database's writes waited. */
  pausedMs: number;
}

/** What bringing a database back from its replica did, as the node that took it reports it. */
export interface RecoveryReport {
  siteId: string;
  from: string;
  to: string;
  /** When the replica last received writes: later ones, if any, are not in the database. */
  replicatedAt: string;
  bytes: number;
  tables: number;
  rows: number;
}

/** How an operation's answer travels as JSON, and is read back by the caller. */
export interface AnswerCodec<Answer> {
  toWire(answer: Answer): unknown;
  fromWire(json: unknown): Answer;
}

/**
 * An answer that is its own JSON. The caller takes it as the operation's answer type without checking
 * it again: it comes from a node of the same cluster, which built it from that type.
 */
const asIs = <Answer>(): AnswerCodec<Answer> => ({ toWire: (answer) => answer, fromWire: (json) => json as Answer });

/** A row value that holds bytes travels as base64, like the database process's own frames. */
function encodeRows(result: StatementResult): unknown {
  return {
    ...result,
    rows: result.rows.map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([column, value]) => [
          column,
          Buffer.isBuffer(value) ? { $blob: value.toString('base64') } : value,
        ]),
      ),
    ),
  };
}

function decodeRows(result: StatementResult): StatementResult {
  return {
    ...result,
    rows: result.rows.map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([column, value]) => [
          column,
          value !== null && typeof value === 'object' && '$blob' in value
            ? Buffer.from(String(value.$blob), 'base64')
            : value,
        ]),
      ),
    ),
  };
}

/** A statement's result, its rows' bytes as base64 on the way. */
const RESULT: AnswerCodec<StatementResult> = {
  toWire: encodeRows,
  fromWire: (json) => decodeRows(asIs<StatementResult>().fromWire(json)),
};

const RESULTS: AnswerCodec<StatementResult[]> = {
  toWire: (results) => results.map(RESULT.toWire),
  fromWire: (json) => asIs<unknown[]>().fromWire(json).map(RESULT.fromWire),
};

/** One operation: the shape of its request, checked by the node called before anything runs, and its answer. */
interface Operation<Request extends z.ZodType, Answer> {
  request: Request;
  answer: AnswerCodec<Answer>;
}

const operation = <Request extends z.ZodType, Answer>(
  request: Request,
  answer: AnswerCodec<Answer>,
): Operation<Request, Answer> => ({ request, answer });

const SqlParam = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const StatementSchema = z.object({ sql: z.string(), params: z.array(SqlParam) });
const AccessSchema = z.enum(['function', 'api', 'system']);
const NONE = z.object({});
/** A call of a branch of the site's database (branch-names.ts) names it; none: the database itself. */
const BRANCH = z.string().refine(isBranchId, 'not a branch');
const OF_BRANCH = { branch: BRANCH.optional() };

const OPERATIONS = {
  create: operation(NONE, asIs<void>()),
  run: operation(
    z.object({ statement: StatementSchema, access: AccessSchema, readsOnly: z.boolean().optional(), ...OF_BRANCH }),
    RESULT,
  ),
  batch: operation(z.object({ statements: z.array(StatementSchema), access: AccessSchema, ...OF_BRANCH }), RESULTS),
  migrate: operation(z.object({ sql: z.string(), receipt: StatementSchema, ...OF_BRANCH }), asIs<void>()),
  makeBranch: operation(z.object({ branch: BRANCH, at: z.iso.datetime(), orNow: z.boolean() }), asIs<BranchMade>()),
  dropBranch: operation(z.object({ branch: BRANCH }), asIs<void>()),
  compact: operation(NONE, asIs<Compaction>()),
  restorePoints: operation(NONE, asIs<RestorePoints>()),
  restore: operation(z.object({ at: z.iso.datetime() }), asIs<Restore>()),
  size: operation(z.object(OF_BRANCH), asIs<number>()),
  remove: operation(NONE, asIs<void>()),
  dropCopy: operation(NONE, asIs<void>()),
  move: operation(z.object({ to: z.string().min(1).max(200) }), asIs<MoveReport>()),
  recover: operation(z.object({ from: z.string().min(1).max(200) }), asIs<RecoveryReport>()),
};

/** The operations whose request and answer are both JSON. */
export type PeerOp = keyof typeof OPERATIONS;
/** What `op` sends, as the node called reads it. */
export type PeerRequest<O extends PeerOp> = Requests[O];
/** What `op` answers. */
export type PeerAnswer<O extends PeerOp> = Answers[O];

type Requests = { [O in PeerOp]: z.output<(typeof OPERATIONS)[O]['request']> };
type Answers = { [O in PeerOp]: (typeof OPERATIONS)[O] extends Operation<z.ZodType, infer A> ? A : never };

/**
 * Every operation with JSON both ways, by name: its request's shape and its answer's type. Typed as a
 * map over the names so that one generic name picks its request and answer together on either side.
 */
export const PEER_CALLS: { [O in PeerOp]: Operation<z.ZodType<PeerRequest<O>>, PeerAnswer<O>> } = OPERATIONS;

/** Sends nothing (`{}`) and is answered with the database's dump as SQL text, or with a JSON failure. */
export const DUMP = 'dump';
export const DUMP_REQUEST = NONE;
/** Sends a database file (its digest signed) and is answered with what the copy holds, in JSON. */
export const RECEIVE = 'receive';
export const RECEIVE_ANSWER = asIs<Census>();

/** Every operation a node answers. */
export type AnyPeerOp = PeerOp | typeof DUMP | typeof RECEIVE;

/** Where a call of `op` about a site's database is sent. */
export const callPath = (siteId: string, op: AnyPeerOp): string => `/v1/site-databases/${siteId}/${op}`;

const PATH = /^\/v1\/site-databases\/([0-9a-f-]{36})\/([a-zA-Z]+)$/;

/** The site and the operation a call's path names; null when it names no operation. */
export function callOf(url: string): { siteId: string; op: AnyPeerOp } | null {
  const match = PATH.exec(url);
  if (!match) return null;
  const op = match[2]!;
  if (op !== DUMP && op !== RECEIVE && !isOp(op)) return null;
  return { siteId: match[1]!, op };
}

const isOp = (name: string): name is PeerOp => Object.hasOwn(OPERATIONS, name);

/** The reasons of failure an answer may give (a StatementError's); the caller takes any other as `unavailable`. */
export const REASONS = ['failed', 'denied', 'reserved', 'too_large', 'full', 'timeout', 'busy', 'unavailable'] as const;

/**
 * A call's JSON answer (status 200): its value, or why it failed. `moved` says the node called does
 * not hold the database (any more): the caller looks its placement up again.
 */
export type Outcome = { ok: true; value: unknown } | { ok: false; reason: StatementError['reason']; message: string };
