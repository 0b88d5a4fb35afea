// The one HTTP client of the `berth` command: the REST API under /v0 with the key from the environment.
// Every failure becomes a CliError a person can act on: the API's envelope, a refused key, a server
// that cannot be reached.
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream } from 'node:stream/web';
import got, { type Got, type Method, RequestError, type Response } from 'got';
import { type ServerEvent, serverEvents } from '../api-clients/server-events.ts';
import { VERSION } from '../version.ts';
import { ApiError, CliError } from './cli-error.ts';
import { type Connection, CREATE_KEY_HINT } from './connection.ts';
import { EXIT } from './exit-codes.ts';

type Query = Record<string, string | number | undefined>;

interface Page {
  pagination: { hasMore: boolean; nextOffset: number | null };
}

const PAGE_SIZE = 200;

/** `web/a b.html` → `web/a%20b.html`: each segment of a file path encoded, the slashes kept. */
export const encodePath = (filePath: string) => filePath.split('/').map(encodeURIComponent).join('/');

export class ApiClient {
  readonly url: string;
  readonly #keySource: string;
  readonly #got: Got;

  constructor(connection: Connection) {
    this.url = connection.url;
    this.#keySource = connection.keySource;
    this.#got = got.extend({
      prefixUrl: `${connection.url}/v0`,
      headers: {
        authorization: `Bearer ${connection.key}`,
        'user-agent': `berth-cli/${VERSION}`,
      },
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { connect: 10_000 },
    });
  }

  get<T>(path: string, query?: Query): Promise<T> {
    return this.#json<T>('GET', path, { searchParams: compact(query) });
  }

  post<T>(path: string, body?: unknown): Promise<T> {
    return this.#json<T>('POST', path, { json: body ?? {} });
  }

  delete<T>(path: string, body?: unknown): Promise<T> {
    return this.#json<T>('DELETE', path, body === undefined ? {} : { json: body });
  }

  /** One request of any method, its input in the query or a JSON body, as the route reads it. */
  request<T>(method: Method, path: string, input: { query?: Query; body?: unknown }): Promise<T> {
    return this.#json<T>(
      method,
      path,
      input.body !== undefined ? { json: input.body } : { searchParams: compact(input.query) },
    );
  }

  /** Streams a body to the API; `bytes` lets the server refuse an oversized file before it is sent. */
  put<T>(path: string, body: Readable, headers: { contentType: string; bytes: number; ifMatch?: string }): Promise<T> {
    return this.#json<T>('PUT', path, {
      body,
      headers: {
        'content-type': headers.contentType,
        'content-length': String(headers.bytes),
        ...(headers.ifMatch ? { 'if-match': headers.ifMatch } : {}),
      },
    });
  }

  /** Every item of a paginated list, page after page. */
  async *list<T>(path: string, field: string, query: Query = {}): AsyncGenerator<T> {
    let offset: number | null = 0;
    while (offset !== null) {
      const page: Page & Record<string, unknown> = await this.get(path, { ...query, limit: PAGE_SIZE, offset });
      yield* page[field] as T[];
      offset = page.pagination.hasMore ? page.pagination.nextOffset : null;
    }
  }

  /** Streams an API path, or an absolute URL the API handed out (a signed download link), into `to`. */
  async download(target: string, to: Writable): Promise<void> {
    const options = { throwHttpErrors: false, retry: { limit: 0 }, timeout: { connect: 10_000 } } as const;
    const stream = /^https?:\/\//.test(target)
      ? got.stream(target, { ...options, headers: { 'user-agent': `berth-cli/${VERSION}` } })
      : this.#got.stream(target, options);
    stream.once('response', (res: Response) => {
      if (res.statusCode >= 400)
        stream.destroy(
          new CliError(`reading ${new URL(res.url).pathname} answered ${res.statusCode}`, { code: 'download_failed' }),
        );
    });
    try {
      await pipeline(stream, to);
    } catch (err) {
      throw this.#failure(err);
    }
  }

  /**
   * The server-sent events of a stream route until it ends or `signal` aborts; a refusal is an ApiError
   * like any answer's, a dropped connection a CliError. The parser is the dashboard's, which speaks the
   * same stream.
   */
  async *events(
    path: string,
    query: Query,
    lastEventId: string | undefined,
    signal: AbortSignal,
  ): AsyncGenerator<ServerEvent> {
    const stream = this.#got.stream(path, {
      searchParams: compact(query),
      headers: lastEventId ? { 'last-event-id': lastEventId } : {},
      signal,
    });
    try {
      const response = await new Promise<Response>((resolve, reject) => {
        stream.once('response', resolve);
        stream.once('error', reject);
      });
      if (response.statusCode >= 400) {
        const chunks: Buffer[] = [];
        for await (const chunk of stream) chunks.push(chunk as Buffer);
        throw this.#refusal(response, Buffer.concat(chunks).toString('utf8'));
      }
      yield* serverEvents(
        Readable.toWeb(stream) as ReadableStream<Uint8Array> as globalThis.ReadableStream<Uint8Array>,
      );
    } catch (err) {
      throw this.#failure(err);
    } finally {
      stream.destroy();
    }
  }

  async #json<T>(method: Method, path: string, options: Record<string, unknown>): Promise<T> {
    let response: Response<string>;
    try {
      response = await this.#got(path, { method, ...options, responseType: 'text' });
    } catch (err) {
      throw this.#failure(err);
    }
    const body = parseJson(response.body);
    // The query endpoint answers a statement the database refused in its own envelope, not as an error.
    if (response.statusCode < 400 || (body as { success?: unknown } | undefined)?.success === false) return body as T;
    throw this.#refusal(response, response.body);
  }

  /** The error an answer of 400 or more is: the API's envelope, or the status where there is none. */
  #refusal(response: Response, text: string): ApiError {
    const body = parseJson(text);
    const envelope = (
      body as { error?: { code?: unknown; message?: unknown; details?: Record<string, unknown> } } | undefined
    )?.error;
    const error =
      typeof envelope?.code === 'string' && typeof envelope.message === 'string'
        ? { code: envelope.code, message: envelope.message, details: envelope.details }
        : {
            code: `http_${response.statusCode}`,
            message: `${this.url} answered ${response.statusCode} ${response.statusMessage ?? ''}`.trim(),
          };
    if (response.statusCode === 401) {
      return new ApiError(
        401,
        { ...error, message: `${this.url} refused the API key from ${this.#keySource}: ${error.message}` },
        { exitCode: EXIT.UNREACHABLE, hint: CREATE_KEY_HINT },
      );
    }
    return new ApiError(response.statusCode, error);
  }

  #failure(err: unknown): unknown {
    if (!(err instanceof RequestError)) return err;
    if (err.cause instanceof CliError) return err.cause;
    if (cannotReach(err)) {
      return new CliError(`cannot reach Berth at ${this.url}: ${err.code}`, {
        code: 'server_unreachable',
        exitCode: EXIT.UNREACHABLE,
        hint: 'Is the server running? Set BERTH_URL to its address (the default is http://127.0.0.1:8080).',
      });
    }
    // A local failure, such as a file that could not be read while it was being sent.
    if ((err.cause as NodeJS.ErrnoException | undefined)?.code) return err.cause;
    return new CliError(`the request to ${this.url} failed: ${err.message}`, { code: 'request_failed' });
  }
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);

/** A request that never reached the server, or got no answer in time: the server is not there. */
export const cannotReach = (err: RequestError): boolean => NETWORK_CODES.has(err.code) || err.name === 'TimeoutError';

const compact = (query: Query = {}) =>
  Object.fromEntries(
    Object.entries(query).filter((entry): entry is [string, string | number] => entry[1] !== undefined),
  );

function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}
