// Peer calls, the answering side: the cluster listener other nodes call (peer-protocol.ts for the
// operations), which checks each call's signature (peer-auth.ts), answers only for the databases
// the metadata places here, and runs each on this node's own provider. A dump is streamed back as SQL
// text; a database file moving here is taken, checked and put in place.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import crypto from 'node:crypto';
import type { Logger } from '../../log.ts';
import { StatementError } from '../provider.ts';
import type { SiteDatabases } from '../local-provider.ts';
import { branchName } from '../branch-names.ts';
import { BlobTooLargeError, readWhole } from '../../../storage/blob-store.ts';
import {
  type AnyPeerOp,
  PEER_CALLS,
  callOf,
  DUMP,
  DUMP_REQUEST,
  type MoveReport,
  type PeerOp,
  type PeerAnswer,
  type PeerRequest,
  type Outcome,
  RECEIVE,
  type RecoveryReport,
} from './peer-protocol.ts';
import { PeerAuthError, type RequestVerifier } from './peer-auth.ts';
import type { PeerTls } from './peer-tls.ts';

/** Largest request body: a migration's SQL or a batch of statements with their parameters. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

export interface PeerServerOptions {
  verifier: RequestVerifier;
  /** This node's own databases: the files in its data dir. */
  provider: SiteDatabases;
  /** Where the metadata places the site's database; a call for one this node does not hold is refused unanswered. */
  whereIs(siteId: string): Promise<'here' | 'elsewhere' | 'none'>;
  /** Moves a database this node holds to another node (move.ts). */
  moveOut(siteId: string, to: string): Promise<MoveReport>;
  /** Brings a database held by a lost node back on this one from its replica (move.ts). */
  recoverHere(siteId: string, from: string): Promise<RecoveryReport>;
  /** The largest database file this node takes from another. */
  maxReceiveBytes: number;
  /** Where a dump is written before it is streamed. */
  tmpDir: string;
  /** TLS both ways: callers must present a certificate the CA signed, as this node does to them. */
  tls: PeerTls | null;
  log: Logger;
}

const NOT_HERE_ONLY: ReadonlySet<AnyPeerOp> = new Set(['remove', 'dropCopy', 'recover']);

async function readBody(req: http.IncomingMessage): Promise<Buffer | null> {
  try {
    return await readWhole(req, MAX_BODY_BYTES);
  } catch (err) {
    if (err instanceof BlobTooLargeError) return null;
    throw err;
  }
}

function answer(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) }).end(text);
}

/** The cluster listener: peer calls from other nodes about site databases, and nothing else. */
export function peerServer(options: PeerServerOptions): http.Server | https.Server {
  const serve = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = req.url ?? '';
    const call = req.method === 'POST' ? callOf(url) : null;
    if (!call) return answer(res, 404, { error: 'no such call' });
    const refuse = (err: unknown) => {
      if (!(err instanceof PeerAuthError)) throw err;
      options.log.warn({ remote: req.socket.remoteAddress, reason: err.message }, 'refused a peer call');
      answer(res, 401, { error: err.message });
    };
    try {
      options.verifier.precheck(req.headers);
    } catch (err) {
      return refuse(err);
    }
    if (call.op === RECEIVE) return receive(options, call.siteId, url, req, res, refuse);
    const body = await readBody(req);
    if (body === null) return answer(res, 413, { error: 'the call is too large' });
    let from: string;
    try {
      from = options.verifier.verify(req.headers, 'POST', url, body);
    } catch (err) {
      return refuse(err);
    }
    const answered = await answerCall(options, call.siteId, call.op, body, from, async (file, bytes) => {
      res.writeHead(200, { 'Content-Type': 'application/sql', 'Content-Length': bytes });
      await pipeline(fs.createReadStream(file), res);
    });
    if (answered) answer(res, answered.status, answered.body);
  };
  const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    serve(req, res).catch((err: unknown) => {
      options.log.error({ err }, 'the cluster listener could not answer');
      if (!res.headersSent) answer(res, 500, { error: 'internal error' });
      else res.destroy();
    });
  };
  const server = options.tls
    ? https.createServer({ ...options.tls, requestCert: true, rejectUnauthorized: true }, handle)
    : http.createServer(handle);
  // Callers keep their connections; Node's agent closes an idle one a second before the Keep-Alive
  // timeout this announces, so a call never goes out on a connection the server is closing.
  server.keepAliveTimeout = 65_000;
  return server;
}

/** What the holding node needs to answer a call: its own databases and where the metadata places them. */
export type CallServer = Pick<PeerServerOptions, 'provider' | 'whereIs' | 'moveOut' | 'recoverHere' | 'tmpDir' | 'log'>;

/** A call's JSON answer: an outcome (200), or a refusal saying why. */
export interface CallAnswer {
  status: number;
  body: Outcome | { error: string };
}

/** The database a call names: the site's, or a branch of it. */
const named = (siteId: string, branch: string | undefined): string => (branch ? branchName(siteId, branch) : siteId);

/** What runs each operation on this node, its request as PEER_CALLS shapes it. */
type Handlers = { [O in PeerOp]: (siteId: string, request: PeerRequest<O>) => Promise<PeerAnswer<O>> };

function handlersOf(options: CallServer): Handlers {
  const { provider } = options;
  return {
    create: (siteId) => provider.create(siteId),
    run: (siteId, { statement, access, readsOnly, branch }) =>
      provider.run(named(siteId, branch), statement, access, { readsOnly: readsOnly === true }),
    batch: (siteId, { statements, access, branch }) => provider.batch(named(siteId, branch), statements, access),
    migrate: (siteId, { sql, receipt, branch }) => provider.migrate(named(siteId, branch), sql, receipt),
    makeBranch: (siteId, { branch, at, orNow }) => provider.makeBranch(branchName(siteId, branch), new Date(at), orNow),
    dropBranch: (siteId, { branch }) => provider.dropBranch(branchName(siteId, branch)),
    compact: (siteId) => provider.compact(siteId),
    restorePoints: (siteId) => provider.restorePoints(siteId),
    restore: (siteId, { at }) => provider.restore(siteId, new Date(at)),
    size: (siteId, { branch }) => provider.size(named(siteId, branch)),
    remove: (siteId) => provider.remove(siteId),
    dropCopy: (siteId) => provider.dropCopy(siteId),
    move: (siteId, { to }) => options.moveOut(siteId, to),
    recover: (siteId, { from }) => options.recoverHere(siteId, from),
  };
}

/** Checks a call's request against its operation's shape (throws if it has not that shape); gives what runs it. */
function prepare<O extends PeerOp>(options: CallServer, op: O, siteId: string, json: unknown): () => Promise<unknown> {
  const { request, answer } = PEER_CALLS[op];
  const input = request.parse(json);
  return async () => answer.toWire(await handlersOf(options)[op](siteId, input));
}

/**
 * Answers a call whose signature was checked (`from` is the calling node), as this node: refused
 * unless the metadata places the database here (or, for a removal or a recovery, not here), then run
 * on this node's own provider. A dump's file is given to `sendDump` (null is returned); every other
 * outcome, a dump's failure included, is the answer.
 */
export async function answerCall(
  options: CallServer,
  siteId: string,
  op: PeerOp | typeof DUMP,
  body: Buffer,
  from: string,
  sendDump: (file: string, bytes: number) => Promise<void>,
): Promise<CallAnswer | null> {
  let run: (() => Promise<unknown>) | null;
  try {
    const json: unknown = JSON.parse(body.toString('utf8'));
    if (op === DUMP) {
      DUMP_REQUEST.parse(json);
      run = null;
    } else {
      run = prepare(options, op, siteId, json);
    }
  } catch {
    return { status: 400, body: { error: 'the call does not have the shape of its operation' } };
  }
  // Only the node the metadata names answers: a caller that looked up an old placement is told so
  // before anything runs, and may ask again. A removal comes after the placement row is gone (or is
  // of a copy never placed here); a recovery is of a database placed on a lost node.
  const where = await options.whereIs(siteId);
  if (NOT_HERE_ONLY.has(op)) {
    if (where === 'here')
      return {
        status: 200,
        body: { ok: false, reason: 'failed', message: 'this node holds the site\u2019s database: it is not removed' },
      };
  } else if (where === 'elsewhere') {
    return {
      status: 200,
      body: { ok: false, reason: 'moved', message: 'this node does not hold the site\u2019s database' },
    };
  } else if (where === 'none') {
    return { status: 200, body: { ok: false, reason: 'unavailable', message: 'the site has no database' } };
  }
  try {
    if (!run) {
      await dumpThen(options, siteId, sendDump);
      return null;
    }
    return { status: 200, body: { ok: true, value: await run() } };
  } catch (err) {
    if (!(err instanceof StatementError)) {
      options.log.error({ err, from, op }, 'a peer call failed');
      return {
        status: 200,
        body: { ok: false, reason: 'unavailable', message: 'the database node could not run the call' },
      };
    }
    return { status: 200, body: { ok: false, reason: err.reason, message: err.message } };
  }
}

/**
 * Takes a copy of a site's database from the node that holds it, which is moving it here: the file is
 * written to a folder of its own while its digest is taken, the signature is checked against that
 * digest, and only then is the copy opened, checked and put in place. Refused before a byte is read
 * when the metadata does not place the database on another node: a copy never replaces a database
 * this node holds.
 */
async function receive(
  options: PeerServerOptions,
  siteId: string,
  url: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  refuse: (err: unknown) => void,
): Promise<void> {
  if ((await options.whereIs(siteId)) !== 'elsewhere')
    return answer(res, 200, {
      ok: false,
      reason: 'failed',
      message: 'this node does not take a copy of that database: the metadata does not place it on another node',
    } satisfies Outcome);
  const declared = Number(req.headers['content-length']);
  if (!Number.isSafeInteger(declared) || declared > options.maxReceiveBytes)
    return answer(res, 413, { error: 'the database file is larger than this node takes' });
  const dir = await options.provider.incoming(siteId);
  let installed = false;
  try {
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    await pipeline(
      req,
      async function* (source) {
        for await (const chunk of source) {
          bytes += (chunk as Buffer).length;
          if (bytes > declared) throw new Error('the body is longer than it said');
          hash.update(chunk as Buffer);
          yield chunk;
        }
      },
      fs.createWriteStream(path.join(dir, 'db.sqlite'), { mode: 0o600, flush: true }),
    );
    if (bytes !== declared) return answer(res, 400, { error: 'the body is shorter than it said' });
    try {
      options.verifier.verifyDigest(req.headers, 'POST', url, hash.digest('hex'));
    } catch (err) {
      return refuse(err);
    }
    try {
      const census = await options.provider.install(siteId, dir);
      installed = true;
      answer(res, 200, { ok: true, value: census } satisfies Outcome);
    } catch (err) {
      if (!(err instanceof StatementError)) throw err;
      answer(res, 200, { ok: false, reason: err.reason, message: err.message } satisfies Outcome);
    }
  } finally {
    if (!installed) await options.provider.discardIncoming(dir);
  }
}

/** Dumps to a file of its own first, so an error is still a JSON answer; then hands it on to be sent. */
async function dumpThen(
  options: CallServer,
  siteId: string,
  send: (file: string, bytes: number) => Promise<void>,
): Promise<void> {
  await fsp.mkdir(options.tmpDir, { recursive: true, mode: 0o700 });
  const file = path.join(options.tmpDir, `dump-${crypto.randomUUID()}.sql.tmp`);
  try {
    await send(file, await options.provider.dump(siteId, file));
  } finally {
    await fsp.rm(file, { force: true });
  }
}
