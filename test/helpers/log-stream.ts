// Reads a live log stream (GET /v0/sites/:siteId/logs/stream) in a test: the events as they come, with
// the dashboard's own parser of server-sent events.
import { type ServerEvent, serverEvents } from '../../control-plane/api-clients/server-events.ts';

export interface LogStreamReader {
  status: number;
  /** The error envelope's code, when the stream was refused. */
  errorCode?: string;
  events: ServerEvent[];
  /** The parsed `data` of each `log` event. */
  lines(): Array<{ id: number; functionPath: string | null; level: string; message: string; requestId: string | null }>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

export async function openLogStream(
  baseUrl: string,
  key: string,
  siteId: string,
  options: { query?: Record<string, string>; lastEventId?: string } = {},
): Promise<LogStreamReader> {
  const abort = new AbortController();
  const url = new URL(`/v0/sites/${siteId}/logs/stream`, baseUrl);
  for (const [name, value] of Object.entries(options.query ?? {})) url.searchParams.set(name, value);
  const res = await fetch(url, {
    headers: {
      authorization: `Bearer ${key}`,
      ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}),
    },
    signal: abort.signal,
  });
  const events: ServerEvent[] = [];
  const reader: LogStreamReader = {
    status: res.status,
    events,
    lines: () => events.filter((e) => e.event === 'log').map((e) => JSON.parse(e.data)),
    ended: Promise.resolve(),
    close: () => abort.abort(),
  };
  if (res.status !== 200 || !res.body) {
    reader.errorCode = ((await res.json()) as { error?: { code?: string } }).error?.code;
    return reader;
  }
  const body = res.body;
  reader.ended = (async () => {
    try {
      for await (const event of serverEvents(body)) events.push(event);
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    }
  })();
  return reader;
}
