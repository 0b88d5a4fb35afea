// Authentication of peer calls, the calls between nodes. Every node derives the same peer key from
// the instance's master key (HKDF), and signs each request with it: the method, the path, the sending
// node, the time, a nonce and a digest of the body. A request is accepted only with a valid signature,
// a time within CLOCK_SKEW_MS of the receiver's and a nonce not seen before in that window, so a copy of
// a request taken off the network cannot be replayed. The key never travels; peer calls carry no
// secret of their own. (Confidentiality on an untrusted network is the operator's: a private network or
// a tunnel, see docs/cluster.md.)
import crypto from 'node:crypto';

const CLOCK_SKEW_MS = 30_000;
/** Nonces remembered at most; past it, requests are refused until old ones expire (a flood, not traffic). */
const MAX_NONCES = 200_000;

export const SIGNATURE_HEADERS = {
  node: 'x-berth-node',
  time: 'x-berth-time',
  nonce: 'x-berth-nonce',
  signature: 'x-berth-signature',
} as const;

/**
 * The key every node signs and checks peer calls with. Its HKDF label keeps the words it was first
 * derived with: a node of another release must derive the same key.
 */
export function peerKey(masterKey: Buffer): Buffer {
  return Buffer.from(crypto.hkdfSync('sha256', masterKey, Buffer.alloc(0), 'berth internal channel v1', 32));
}

/** The SHA-256 of a body, hex: what a signature covers of it (a file sent in a stream is hashed as it is read). */
export const bodyDigest = (body: Uint8Array): string => crypto.createHash('sha256').update(body).digest('hex');

function mac(
  key: Buffer,
  method: string,
  path: string,
  node: string,
  time: string,
  nonce: string,
  digest: string,
): string {
  return crypto
    .createHmac('sha256', key)
    .update([method.toUpperCase(), path, node, time, nonce, digest].join('\n'))
    .digest('hex');
}

/** The headers that authenticate a request from `node`. */
export function signRequest(
  key: Buffer,
  node: string,
  method: string,
  path: string,
  body: Uint8Array,
  now = Date.now(),
): Record<string, string> {
  return signDigest(key, node, method, path, bodyDigest(body), now);
}

/** The headers that authenticate a request from `node` whose body has the SHA-256 `digest`. */
export function signDigest(
  key: Buffer,
  node: string,
  method: string,
  path: string,
  digest: string,
  now = Date.now(),
): Record<string, string> {
  const time = String(now);
  const nonce = crypto.randomBytes(16).toString('hex');
  return {
    [SIGNATURE_HEADERS.node]: node,
    [SIGNATURE_HEADERS.time]: time,
    [SIGNATURE_HEADERS.nonce]: nonce,
    [SIGNATURE_HEADERS.signature]: mac(key, method, path, node, time, nonce, digest),
  };
}

export class PeerAuthError extends Error {}

/** Checks requests' signatures and remembers their nonces for as long as their time is acceptable. */
export class RequestVerifier {
  readonly #key: Buffer;
  readonly #seen = new Map<string, number>();

  constructor(key: Buffer) {
    this.#key = key;
  }

  /**
   * What can be checked before the body is read: the request carries a signature, made at an
   * acceptable time. A caller without one is refused before it can make the node read a large body.
   */
  precheck(headers: Record<string, string | string[] | undefined>, now = Date.now()): void {
    this.#signed(headers, now);
  }

  /** Returns the sending node's id, or throws PeerAuthError saying what was wrong (never the key). */
  verify(
    headers: Record<string, string | string[] | undefined>,
    method: string,
    path: string,
    body: Uint8Array,
    now = Date.now(),
  ): string {
    return this.verifyDigest(headers, method, path, bodyDigest(body), now);
  }

  /** verify() for a body already read elsewhere (a file streamed to disk), by its SHA-256. */
  verifyDigest(
    headers: Record<string, string | string[] | undefined>,
    method: string,
    path: string,
    digest: string,
    now = Date.now(),
  ): string {
    const { node, time, nonce, signature } = this.#signed(headers, now);
    const expected = Buffer.from(mac(this.#key, method, path, node, time, nonce, digest), 'hex');
    if (!crypto.timingSafeEqual(expected, Buffer.from(signature, 'hex')))
      throw new PeerAuthError('the signature does not match: the nodes do not share one master key');
    this.#forgetExpired(now);
    if (this.#seen.has(nonce)) throw new PeerAuthError('the request was replayed');
    if (this.#seen.size >= MAX_NONCES) throw new PeerAuthError('too many requests to remember; try again shortly');
    this.#seen.set(nonce, Number(time) + CLOCK_SKEW_MS);
    return node;
  }

  #signed(
    headers: Record<string, string | string[] | undefined>,
    now: number,
  ): { node: string; time: string; nonce: string; signature: string } {
    const header = (name: string) => {
      const value = headers[name];
      return typeof value === 'string' ? value : '';
    };
    const node = header(SIGNATURE_HEADERS.node);
    const time = header(SIGNATURE_HEADERS.time);
    const nonce = header(SIGNATURE_HEADERS.nonce);
    const signature = header(SIGNATURE_HEADERS.signature);
    if (!node || !/^\d{1,15}$/.test(time) || !/^[0-9a-f]{32}$/.test(nonce) || !/^[0-9a-f]{64}$/.test(signature))
      throw new PeerAuthError('the request is not signed');
    if (Math.abs(now - Number(time)) > CLOCK_SKEW_MS)
      throw new PeerAuthError('the request is too old or from the future: check the nodes\u2019 clocks');
    return { node, time, nonce, signature };
  }

  #forgetExpired(now: number): void {
    // Map iteration is in insertion order, which is nearly expiry order: stop at the first live one.
    for (const [nonce, expiry] of this.#seen) {
      if (expiry >= now) break;
      this.#seen.delete(nonce);
    }
  }
}
