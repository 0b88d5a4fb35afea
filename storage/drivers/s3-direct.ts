// The object store's most frequent requests, a GET (of a whole object or a range) and a PUT of bytes in
// memory, sent straight on node:http(s). Through the SDK each of them costs about 0.8 ms of CPU (its
// middleware, serializers and handler), here about a third of that. The SDK stays the reference: it
// resolves the endpoint and the credentials these requests use, its own Signature V4 signer
// (@smithy/signature-v4) signs them, and any answer but the expected one (an error, a redirect, a
// connection that fails or goes silent) is left to it, which sends the request again with its retries
// and names what went wrong.
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import type { ByteRange } from '../blob-driver.ts';

/** How the SDK reaches the bucket: its endpoint and the settings its endpoint rules read. */
export interface DirectTarget {
  bucket: string;
  endpoint?: string;
  forcePathStyle: boolean;
  /** How long a connection may take, and a request may go with nothing arriving, before it is left to the SDK. */
  connectMs: number;
  silenceMs: number;
}

/** Resolved config fields of the S3 client these requests take from it. */
interface ClientConfig {
  region: () => Promise<string>;
  credentials: () => Promise<{ accessKeyId: string; secretAccessKey: string; sessionToken?: string }>;
  /** The hash the SDK signs with, and whether it escapes a path again when signing it (not for S3). */
  sha256: ConstructorParameters<typeof SignatureV4>[0]['sha256'];
  signingEscapePath?: boolean;
  useFipsEndpoint: () => Promise<boolean>;
  useDualstackEndpoint: () => Promise<boolean>;
  serviceConfiguredEndpoint?: () => Promise<string | undefined>;
  endpointProvider: (
    params: Record<string, unknown>,
    context: Record<string, unknown>,
  ) => { url: URL; properties?: Record<string, unknown>; headers?: Record<string, string[]> };
  /** The SDK's correction of this machine's clock, moved when the store says it is skewed. */
  systemClockOffset?: number;
}

/** A GET's outcome: the bytes as they arrive, the object is not there, or left to the SDK (null). */
export type DirectRead = Readable | 'missing' | null;

const EMPTY_SHA256 = crypto.createHash('sha256').digest('hex');
/** As many connections as the SDK's own handler keeps. */
const MAX_SOCKETS = 50;

/** A path segment as Signature V4 encodes it: everything but the unreserved characters. */
const encodeSegment = (segment: string): string =>
  encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export class DirectRequests {
  readonly #config: ClientConfig;
  readonly #url: URL;
  readonly #basePath: string;
  readonly #connectMs: number;
  readonly #silenceMs: number;
  readonly #agent: http.Agent;
  readonly #request: typeof http.request;
  readonly #signer: SignatureV4;

  private constructor(config: ClientConfig, url: URL, region: string, target: DirectTarget) {
    this.#config = config;
    this.#url = url;
    this.#basePath = url.pathname.replace(/\/+$/, '');
    this.#connectMs = target.connectMs;
    this.#silenceMs = target.silenceMs;
    const secure = url.protocol === 'https:';
    this.#agent = secure
      ? new https.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS })
      : new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
    this.#request = secure ? https.request : http.request;
    this.#signer = new SignatureV4({
      credentials: config.credentials,
      region,
      service: 's3',
      sha256: config.sha256,
      uriEscapePath: config.signingEscapePath ?? false,
      applyChecksum: false,
    });
  }

  /**
   * The bucket's endpoint as the SDK's rules resolve it; null when those rules ask for more than a
   * plain Signature V4 request to one URL (an access point, S3 Express, extra headers): then every
   * request stays with the SDK.
   */
  static async open(client: S3Client, target: DirectTarget): Promise<DirectRequests | null> {
    const config = client.config as unknown as ClientConfig;
    const region = await config.region();
    const endpoint = target.endpoint ?? (await config.serviceConfiguredEndpoint?.());
    const resolved = config.endpointProvider(
      {
        Bucket: target.bucket,
        Region: region,
        UseFIPS: await config.useFipsEndpoint(),
        UseDualStack: await config.useDualstackEndpoint(),
        ForcePathStyle: target.forcePathStyle,
        Accelerate: false,
        ...(endpoint ? { Endpoint: endpoint } : {}),
      },
      {},
    );
    const { authSchemes, ...rest } = (resolved.properties ?? {}) as { authSchemes?: Array<Record<string, unknown>> };
    const scheme = authSchemes?.length === 1 ? authSchemes[0]! : undefined;
    const plain =
      scheme?.name === 'sigv4' &&
      scheme.signingName === 's3' &&
      Object.keys(rest).length === 0 &&
      Object.keys(resolved.headers ?? {}).length === 0 &&
      !resolved.url.search &&
      (resolved.url.protocol === 'http:' || resolved.url.protocol === 'https:');
    if (!plain) return null;
    return new DirectRequests(
      config,
      new URL(resolved.url.href),
      typeof scheme.signingRegion === 'string' ? scheme.signingRegion : region,
      target,
    );
  }

  /** The object, or a range of it. */
  async get(object: string, range?: ByteRange): Promise<DirectRead> {
    const headers: Record<string, string> = range ? { range: `bytes=${range.start}-${range.end}` } : {};
    const res = await this.#send('GET', object, headers, EMPTY_SHA256);
    if (!res) return null;
    // A 404 is a missing key only when its error says so: the bucket itself may be gone.
    if (res.statusCode === 404) return (await errorCode(res)) === 'NoSuchKey' ? 'missing' : null;
    if (range ? res.statusCode === 206 && rangeAnswered(res, range) : res.statusCode === 200) return res;
    res.resume();
    return null;
  }

  /** Whether the store took the bytes (they are then stored, whole); false leaves the PUT to the SDK. */
  async put(object: string, bytes: Uint8Array, contentType?: string): Promise<boolean> {
    const headers: Record<string, string> = { 'content-length': String(bytes.length) };
    if (contentType) headers['content-type'] = contentType;
    const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
    const res = await this.#send('PUT', object, headers, sha256, bytes);
    res?.resume();
    return res?.statusCode === 200;
  }

  close(): void {
    this.#agent.destroy();
  }

  /** Sends one signed request; the answer once its head has arrived, or null when none came. */
  async #send(
    method: 'GET' | 'PUT',
    object: string,
    headers: Record<string, string>,
    payloadSha256: string,
    body?: Uint8Array,
  ): Promise<http.IncomingMessage | null> {
    const path = `${this.#basePath}/${object.split('/').map(encodeSegment).join('/')}`;
    try {
      await this.#sign(method, path, headers, payloadSha256);
    } catch {
      // No credentials now: the SDK says why.
      return null;
    }
    return new Promise((resolve) => {
      const req = this.#request(
        {
          protocol: this.#url.protocol,
          hostname: this.#url.hostname,
          port: this.#url.port,
          method,
          path,
          headers,
          agent: this.#agent,
        },
        resolve,
      );
      // As the SDK's timeouts: a connection that takes this long fails the request, and so does a store
      // silent this long, while the answer's bytes arrive too.
      req.once('socket', (socket) => {
        if (!socket.connecting) return;
        const timer = setTimeout(() => req.destroy(new Error('no connection to the object store')), this.#connectMs);
        socket.once('connect', () => clearTimeout(timer));
        socket.once('close', () => clearTimeout(timer));
      });
      req.setTimeout(this.#silenceMs, () => req.destroy(new Error('the object store went silent')));
      // After the head has arrived, a failure reaches the caller through the answer's stream.
      req.on('error', () => resolve(null));
      req.end(body);
    });
  }

  /** Adds the signature's headers; the payload's hash is given, so the signer never reads the body. */
  async #sign(method: string, path: string, headers: Record<string, string>, payloadSha256: string): Promise<void> {
    headers.host = this.#url.host;
    headers['x-amz-content-sha256'] = payloadSha256;
    const signed = await this.#signer.sign(
      { method, protocol: this.#url.protocol, hostname: this.#url.hostname, path, headers, query: {} },
      { signingDate: new Date(Date.now() + (this.#config.systemClockOffset ?? 0)) },
    );
    Object.assign(headers, signed.headers);
  }
}

/** An error answer's <Code>, from at most its first 8 KiB (S3's error documents are a few hundred bytes). */
async function errorCode(res: http.IncomingMessage): Promise<string | null> {
  let text = '';
  for await (const chunk of res) {
    if (text.length < 8192) text += String(chunk);
  }
  return /<Code>([^<]*)<\/Code>/.exec(text)?.[1] ?? null;
}

/** Whether a 206 holds the bytes asked for, from the first one on and none past the last. */
function rangeAnswered(res: http.IncomingMessage, range: ByteRange): boolean {
  const answered = /^bytes (\d+)-(\d+)\//.exec(res.headers['content-range'] ?? '');
  return answered !== null && Number(answered[1]) === range.start && Number(answered[2]) <= range.end;
}
