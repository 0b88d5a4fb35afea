// The internal channel's site database calls: a node that does not hold a site's database sends the
// provider call (../provider.ts) to the node that does, which runs it on its own provider
// with the same limits and confinement as a local call and answers the same outcome. One POST per call,
// signed (channel-auth.ts), over TLS both ways when the cluster has certificates; a dump is streamed
// back as SQL text. Moving a database (move.ts) uses three more: `move` asks the holding node
// to move it, `receive` carries the file to the new node, `recover` has a node take a lost node's
// database from its replica; `remove` also removes a copy that did not become the database. Both sides
// are in this file so that they cannot drift apart.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import crypto from 'node:crypto';
import { z } from 'zod';
import type { Logger } from '../../log.ts';
import { type Access, type Statement, type StatementResult, StatementError } from '../provider.ts';
import type { Census } from '../provider.ts';
import type { SiteDatabases } from '../local-provider.ts';
import { BlobTooLargeError, readWhole } from '../../../storage/blob-store.ts';
import { MAX_DB_FRAME_BYTES } from '../protocol.ts';
import { ChannelAuthError, type RequestVerifier, signDigest, signRequest } from './channel-auth.ts';

/** Largest request body: a migration's SQL or a batch of statements with their parameters. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** Largest answer: a database process's largest frame, its bytes as base64 in JSON, and room to spare. */
const MAX_ANSWER_BYTES = 2 * MAX_DB_FRAME_BYTES;
/** Time to reach the holding node; past it the node is taken to be down. */
const CONNECT_TIMEOUT_MS = 3_000;
/** Margin over the call's own time limit, for the trip both ways. */
const TRIP_MARGIN_MS = 5_000;

const REASONS = ['failed', 'denied', 'reserved', 'too_large', 'full', 'timeout', 'busy', 'unavailable'] as const;
type Reason = (typeof REASONS)[number];

const SqlParam = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const StatementSchema = z.object({ sql: z.string(), params: z.array(SqlParam) });
const AccessSchema = z.enum(['function', 'api', 'system']);

const BODIES = {
  create: z.object({}),
  run: z.object({ statement: StatementSchema, access: AccessSchema, readsOnly: z.boolean().optional() }),
  batch: z.object({ statements: z.array(StatementSchema), access: AccessSchema }),
  migrate: z.object({ sql: z.string(), receipt: StatementSchema }),
  dump: z.object({}),
  compact: z.object({}),
  restorePoints: z.object({}),
  restore: z.object({ at: z.iso.datetime() }),
  size: z.object({}),
  remove: z.object({}),
  dropCopy: z.object({}),
  move: z.object({ to: z.string().min(1).max(200) }),
  recover: z.object({ from: z.string().min(1).max(200) }),
} as const;
/** Calls whose body is JSON; `receive` carries a database file. */
export type Op = keyof typeof BODIES;
const RECEIVE = 'receive';

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

/** A row value that holds bytes travels as base64, like the database process's own frames. */
function encodeRows(result: StatementResult) {
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

export interface ChannelServerOptions {
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
  tls: ChannelTls | null;
  log: Logger;
}

/** This node's certificate and key, and the CA that signed every node's (PEM). */
export interface ChannelTls {
  cert: Buffer;
  key: Buffer;
  ca: Buffer;
}

const PATH = /^\/v1\/site-databases\/([0-9a-f-]{36})\/([a-zA-Z]+)$/;
const NOT_HERE_ONLY: ReadonlySet<Op> = new Set(['remove', 'dropCopy', 'recover']);

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

/** The internal channel's listener: site database calls from other nodes, and nothing else. */
export function channelServer(options: ChannelServerOptions): http.Server | https.Server {
  const serve = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = req.url ?? '';
    const match = PATH.exec(url);
    if (req.method !== 'POST' || !match || (!Object.hasOwn(BODIES, match[2]!) && match[2] !== RECEIVE))
      return answer(res, 404, { error: 'no such call' });
    const refuse = (err: unknown) => {
      if (!(err instanceof ChannelAuthError)) throw err;
      options.log.warn(
        { remote: req.socket.remoteAddress, reason: err.message },
        'refused a call on the internal channel',
      );
      answer(res, 401, { error: err.message });
    };
    try {
      options.verifier.precheck(req.headers);
    } catch (err) {
      return refuse(err);
    }
    if (match[2] === RECEIVE) return receive(options, match[1]!, url, req, res, refuse);
    const body = await readBody(req);
    if (body === null) return answer(res, 413, { error: 'the call is too large' });
    let from: string;
    try {
      from = options.verifier.verify(req.headers, 'POST', url, body);
    } catch (err) {
      return refuse(err);
    }
    const answered = await answerCall(options, match[1]!, match[2] as Op, body, from, async (file, bytes) => {
      res.writeHead(200, { 'Content-Type': 'application/sql', 'Content-Length': bytes });
      await pipeline(fs.createReadStream(file), res);
    });
    if (answered) answer(res, answered.status, answered.body);
  };
  const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    serve(req, res).catch((err: unknown) => {
      options.log.error({ err }, 'the internal channel could not answer');
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
export type CallServer = Pick<
  ChannelServerOptions,
  'provider' | 'whereIs' | 'moveOut' | 'recoverHere' | 'tmpDir' | 'log'
>;

/** A call's JSON answer: `{ok: true, value}` or `{ok: false, reason, message}` (200), or a refusal. */
export interface CallAnswer {
  status: number;
  body: unknown;
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
  op: Op,
  body: Buffer,
  from: string,
  sendDump: (file: string, bytes: number) => Promise<void>,
): Promise<CallAnswer | null> {
  let input: Record<string, unknown>;
  try {
    input = BODIES[op].parse(JSON.parse(body.toString('utf8'))) as Record<string, unknown>;
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
    if (op === 'dump') {
      await dumpThen(options, siteId, sendDump);
      return null;
    }
    const value =
      op === 'move'
        ? await options.moveOut(siteId, (input as { to: string }).to)
        : op === 'recover'
          ? await options.recoverHere(siteId, (input as { from: string }).from)
          : await runOp(options.provider, siteId, op, input);
    return { status: 200, body: { ok: true, value } };
  } catch (err) {
    if (!(err instanceof StatementError)) {
      options.log.error({ err, from, op }, 'a call on the internal channel failed');
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
  options: ChannelServerOptions,
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
    });
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
      answer(res, 200, { ok: true, value: census });
    } catch (err) {
      if (!(err instanceof StatementError)) throw err;
      answer(res, 200, { ok: false, reason: err.reason, message: err.message });
    }
  } finally {
    if (!installed) await options.provider.discardIncoming(dir);
  }
}

async function runOp(
  provider: SiteDatabases,
  siteId: string,
  op: Exclude<Op, 'dump' | 'move' | 'recover'>,
  input: Record<string, unknown>,
): Promise<unknown> {
  switch (op) {
    case 'create':
      return provider.create(siteId);
    case 'run':
      return encodeRows(
        await provider.run(siteId, input.statement as Statement, input.access as Access, {
          readsOnly: input.readsOnly === true,
        }),
      );
    case 'batch':
      return (await provider.batch(siteId, input.statements as Statement[], input.access as Access)).map(encodeRows);
    case 'migrate':
      return provider.migrate(siteId, input.sql as string, input.receipt as Statement);
    case 'compact':
      return provider.compact(siteId);
    case 'restorePoints':
      return provider.restorePoints(siteId);
    case 'restore':
      return provider.restore(siteId, new Date(input.at as string));
    case 'size':
      return provider.size(siteId);
    case 'remove':
      return provider.remove(siteId);
    case 'dropCopy':
      return provider.dropCopy(siteId);
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

/**
 * What a node asks of the node that holds a site's database: ChannelClient over HTTP, or, in tests, a
 * stand-in for the network hop that hands calls to answerCall and answers to outcomeOf.
 */
export interface DatabaseChannel {
  /** Runs `op` on the node at `address`; answers its value or throws its failure (outcomeOf). */
  call(address: string, siteId: string, op: Exclude<Op, 'dump'>, input: object, timeoutMs: number): Promise<unknown>;
  /** Writes the site database's dump, as the holding node makes it, to `file`; returns its size. */
  dump(address: string, siteId: string, file: string, timeoutMs: number): Promise<number>;
  close(): void;
}

/** Calls another node's channel; every failure to get an answer is the database being unavailable. */
export class ChannelClient implements DatabaseChannel {
  readonly #key: Buffer;
  readonly #nodeId: string;
  readonly #agent: http.Agent;
  readonly #tls: boolean;
  #calls = 0;

  constructor(key: Buffer, nodeId: string, tls: ChannelTls | null) {
    this.#key = key;
    this.#nodeId = nodeId;
    this.#tls = tls !== null;
    this.#agent = tls
      ? new https.Agent({ keepAlive: true, maxSockets: 64, ...tls })
      : new http.Agent({ keepAlive: true, maxSockets: 64 });
  }

  /**
   * Runs `op` on the node at `address`. A call is sent once: it is retried only when the connection
   * was refused, when nothing was sent and nothing can have been applied.
   */
  async call(
    address: string,
    siteId: string,
    op: Exclude<Op, 'dump'>,
    input: object,
    timeoutMs: number,
  ): Promise<unknown> {
    const body = Buffer.from(JSON.stringify(input));
    let response: { status: number; body: Buffer };
    try {
      response = await this.#request(address, `/v1/site-databases/${siteId}/${op}`, body, timeoutMs);
    } catch (err) {
      if (err instanceof StatementError) throw err;
      if ((err as NodeJS.ErrnoException).code !== 'ECONNREFUSED') throw unreachable(err);
      try {
        response = await this.#request(address, `/v1/site-databases/${siteId}/${op}`, body, timeoutMs);
      } catch (again) {
        throw unreachable(again);
      }
    }
    return outcomeOf(op, response);
  }

  /** Writes the site database's dump, as the holding node makes it, to `file`; returns its size. */
  async dump(address: string, siteId: string, file: string, timeoutMs: number): Promise<number> {
    const path = `/v1/site-databases/${siteId}/dump`;
    const body = Buffer.from('{}');
    const handle = await fsp.open(file, 'w', 0o600);
    try {
      let bytes = 0;
      let json: Buffer | null = null;
      await this.#send(address, path, body, timeoutMs, async (res) => {
        if (res.headers['content-type'] !== 'application/sql') {
          json = await collect(res);
          return;
        }
        for await (const chunk of res) {
          await handle.write(chunk as Buffer);
          bytes += (chunk as Buffer).length;
        }
        if (res.headers['content-length'] !== String(bytes))
          throw new StatementError('unavailable', 'the dump was cut off on its way from the database node');
      }).catch((err: unknown) => {
        throw err instanceof StatementError ? err : unreachable(err);
      });
      if (json) parseOutcome({ status: 200, body: json });
      await handle.sync();
      return bytes;
    } finally {
      await handle.close();
    }
  }

  /**
   * Sends a site database's file to the node at `address`, which checks it and puts it in place as
   * a copy not yet placed there; answers what the copy holds. Sent once: not retried.
   */
  async sendFile(address: string, siteId: string, file: string, timeoutMs: number): Promise<Census> {
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    for await (const chunk of fs.createReadStream(file)) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
    }
    const body: FileBody = { file, bytes, digest: hash.digest('hex') };
    let status = 0;
    let received: Buffer = Buffer.alloc(0);
    await this.#send(address, `/v1/site-databases/${siteId}/${RECEIVE}`, body, timeoutMs, async (res) => {
      status = res.statusCode ?? 0;
      received = await collect(res);
    }).catch((err: unknown) => {
      throw err instanceof StatementError ? err : unreachable(err);
    });
    return parseOutcome({ status, body: received }) as Census;
  }

  close(): void {
    this.#agent.destroy();
  }

  /** Calls sent so far, each attempt once, for the node's metrics. */
  get calls(): number {
    return this.#calls;
  }

  #request(address: string, path: string, body: Buffer, timeoutMs: number): Promise<{ status: number; body: Buffer }> {
    let status = 0;
    let received: Buffer = Buffer.alloc(0);
    return this.#send(address, path, body, timeoutMs, async (res) => {
      status = res.statusCode ?? 0;
      received = await collect(res);
    }).then(() => ({ status, body: received }));
  }

  #send(
    address: string,
    path: string,
    body: Buffer | FileBody,
    timeoutMs: number,
    read: (res: http.IncomingMessage) => Promise<void>,
  ): Promise<void> {
    const url = new URL(path, address);
    const json = Buffer.isBuffer(body);
    this.#calls++;
    return new Promise<void>((resolve, reject) => {
      // Every node of a cluster speaks TLS on its channel, or none does.
      if ((url.protocol === 'https:') !== this.#tls)
        throw Object.assign(
          new Error(
            `this node's channel ${this.#tls ? 'uses' : 'does not use'} TLS, and ${address} ${this.#tls ? 'does not' : 'does'}`,
          ),
          { code: 'ETLSMISMATCH' },
        );
      const req = (this.#tls ? https : http).request(url, {
        method: 'POST',
        agent: this.#agent,
        headers: json
          ? {
              'Content-Type': 'application/json',
              'Content-Length': body.length,
              ...signRequest(this.#key, this.#nodeId, 'POST', path, body),
            }
          : {
              'Content-Type': 'application/octet-stream',
              'Content-Length': body.bytes,
              ...signDigest(this.#key, this.#nodeId, 'POST', path, body.digest),
            },
        timeout: CONNECT_TIMEOUT_MS,
      });
      const deadline = setTimeout(
        () => req.destroy(Object.assign(new Error('the database node did not answer in time'), { code: 'ETIMEDOUT' })),
        timeoutMs + TRIP_MARGIN_MS,
      );
      // `timeout` covers an idle socket; once connected, the call may take as long as its own limit.
      req.on('socket', (socket) => {
        if (socket.connecting) socket.once('connect', () => req.setTimeout(0));
        else req.setTimeout(0);
      });
      req.on('timeout', () =>
        req.destroy(Object.assign(new Error('the database node could not be reached in time'), { code: 'ETIMEDOUT' })),
      );
      req.on('error', (err) => {
        clearTimeout(deadline);
        reject(err);
      });
      req.on('response', (res) => {
        read(res).then(
          () => {
            clearTimeout(deadline);
            resolve();
          },
          (err: unknown) => {
            clearTimeout(deadline);
            res.destroy();
            reject(err);
          },
        );
      });
      if (json) return req.end(body);
      // A file that no longer matches its digest is refused by the receiver's signature check.
      pipeline(fs.createReadStream(body.file), req).catch((err: unknown) => req.destroy(err as Error));
    });
  }
}

/** A file sent as a call's body, with its size and SHA-256 taken beforehand for the signature. */
interface FileBody {
  file: string;
  bytes: number;
  digest: string;
}

/** An answer from another node, read whole up to what any answer can be: a result as large as a database process may send, as JSON. */
async function collect(stream: http.IncomingMessage): Promise<Buffer> {
  try {
    return await readWhole(stream, MAX_ANSWER_BYTES);
  } catch (err) {
    if (err instanceof BlobTooLargeError)
      throw new StatementError('unavailable', 'the database node answered more than any result can be');
    throw err;
  }
}

/** A node that is down, restarting or unreachable is, to the caller, its databases being unavailable. */
function unreachable(err: unknown): StatementError {
  const code = (err as NodeJS.ErrnoException).code;
  return new StatementError(
    'unavailable',
    `the node that holds the site\u2019s database is not answering${code ? ` (${code})` : ''}`,
  );
}

/** Thrown when the node asked no longer holds the database: the caller looks its placement up again. */
export class MovedError extends Error {}

/** A call's value from the holding node's answer, its rows' bytes restored; a failure is thrown. */
export function outcomeOf(op: Op, response: { status: number; body: Buffer }): unknown {
  const outcome = parseOutcome(response);
  if (op === 'run') return decodeRows(outcome as StatementResult);
  if (op === 'batch') return (outcome as StatementResult[]).map(decodeRows);
  return outcome;
}

function parseOutcome(response: { status: number; body: Buffer }): unknown {
  let parsed: { ok?: boolean; value?: unknown; reason?: string; message?: string; error?: string };
  try {
    parsed = JSON.parse(response.body.toString('utf8'));
  } catch {
    throw new StatementError('unavailable', 'the database node answered something that is not a result');
  }
  if (response.status !== 200)
    throw new StatementError('unavailable', `the database node refused the call: ${parsed.error ?? response.status}`);
  if (parsed.ok === true) return parsed.value;
  if (parsed.reason === 'moved') throw new MovedError(parsed.message);
  const reason = (REASONS as readonly string[]).includes(parsed.reason ?? '')
    ? (parsed.reason as Reason)
    : 'unavailable';
  throw new StatementError(
    reason,
    typeof parsed.message === 'string' ? parsed.message : 'the database node could not run the call',
  );
}
