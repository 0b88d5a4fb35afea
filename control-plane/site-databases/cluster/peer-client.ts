// Peer calls, the calling side: sends an operation (peer-protocol.ts) to the node that holds
// a site's database, signed (peer-auth.ts), over TLS both ways when the cluster has certificates,
// and reads its answer back as the operation's answer type, or its failure as a StatementError. Every
// failure to get an answer is the database being unavailable.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { pipeline } from 'node:stream/promises';
import crypto from 'node:crypto';
import { type Census, StatementError } from '../provider.ts';
import { BlobTooLargeError, readWhole } from '../../../storage/blob-store.ts';
import { MAX_DB_FRAME_BYTES } from '../protocol.ts';
import {
  PEER_CALLS,
  callPath,
  DUMP,
  type PeerOp,
  type PeerAnswer,
  type PeerRequest,
  RECEIVE,
  RECEIVE_ANSWER,
  REASONS,
} from './peer-protocol.ts';
import { signDigest, signRequest } from './peer-auth.ts';
import type { PeerTls } from './peer-tls.ts';

/** Largest answer: a database process's largest frame, its bytes as base64 in JSON, and room to spare. */
const MAX_ANSWER_BYTES = 2 * MAX_DB_FRAME_BYTES;
/** Time to reach the holding node; past it the node is taken to be down. */
const CONNECT_TIMEOUT_MS = 3_000;
/** Margin over the call's own time limit, for the trip both ways. */
const TRIP_MARGIN_MS = 5_000;

/**
 * What a node asks of the node that holds a site's database: PeerClient over HTTP, or, in tests, a
 * stand-in for the network hop that hands calls to answerCall and answers to outcomeOf.
 */
export interface Peers {
  /** Runs `op` on the node at `address`; answers its value or throws its failure (outcomeOf). */
  call<O extends PeerOp>(
    address: string,
    siteId: string,
    op: O,
    request: PeerRequest<O>,
    timeoutMs: number,
  ): Promise<PeerAnswer<O>>;
  /** Writes the site database's dump, as the holding node makes it, to `file`; returns its size. */
  dump(address: string, siteId: string, file: string, timeoutMs: number): Promise<number>;
  close(): void;
}

/** Calls another node's cluster listener; every failure to get an answer is the database being unavailable. */
export class PeerClient implements Peers {
  readonly #key: Buffer;
  readonly #nodeId: string;
  readonly #agent: http.Agent;
  readonly #tls: boolean;
  #calls = 0;

  constructor(key: Buffer, nodeId: string, tls: PeerTls | null) {
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
  async call<O extends PeerOp>(
    address: string,
    siteId: string,
    op: O,
    request: PeerRequest<O>,
    timeoutMs: number,
  ): Promise<PeerAnswer<O>> {
    const body = Buffer.from(JSON.stringify(request));
    let response: { status: number; body: Buffer };
    try {
      response = await this.#request(address, callPath(siteId, op), body, timeoutMs);
    } catch (err) {
      if (err instanceof StatementError) throw err;
      if ((err as NodeJS.ErrnoException).code !== 'ECONNREFUSED') throw unreachable(err);
      try {
        response = await this.#request(address, callPath(siteId, op), body, timeoutMs);
      } catch (again) {
        throw unreachable(again);
      }
    }
    return outcomeOf(op, response);
  }

  /** Writes the site database's dump, as the holding node makes it, to `file`; returns its size. */
  async dump(address: string, siteId: string, file: string, timeoutMs: number): Promise<number> {
    const body = Buffer.from('{}');
    const handle = await fsp.open(file, 'w', 0o600);
    try {
      let bytes = 0;
      let json: Buffer | null = null;
      await this.#send(address, callPath(siteId, DUMP), body, timeoutMs, async (res) => {
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
      if (json) answerValue({ status: 200, body: json });
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
    await this.#send(address, callPath(siteId, RECEIVE), body, timeoutMs, async (res) => {
      status = res.statusCode ?? 0;
      received = await collect(res);
    }).catch((err: unknown) => {
      throw err instanceof StatementError ? err : unreachable(err);
    });
    return RECEIVE_ANSWER.fromWire(answerValue({ status, body: received }));
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
      // Every node of a cluster uses TLS for its peer calls, or none does.
      if ((url.protocol === 'https:') !== this.#tls)
        throw Object.assign(
          new Error(
            `this node ${this.#tls ? 'uses' : 'does not use'} TLS for peer calls, and ${address} ${this.#tls ? 'does not' : 'does'}`,
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

/** A call's answer from the holding node, as `op` answers (its rows' bytes restored); a failure is thrown. */
export function outcomeOf<O extends PeerOp>(op: O, response: { status: number; body: Buffer }): PeerAnswer<O> {
  return PEER_CALLS[op].answer.fromWire(answerValue(response));
}

/** The value of an answer, as JSON; a refusal or a failure is thrown (MovedError for `moved`). */
export function answerValue(response: { status: number; body: Buffer }): unknown {
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
  const reason = REASONS.find((known) => known === parsed.reason) ?? 'unavailable';
  throw new StatementError(
    reason,
    typeof parsed.message === 'string' ? parsed.message : 'the database node could not run the call',
  );
}
