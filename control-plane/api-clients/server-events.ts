// Server-sent events read from a fetch() body: EventSource cannot send the Berth-Account and CSRF
// headers the dashboard's requests carry, so the stream is parsed here (fields event, id and data;
// comments skipped; an event ends at a blank line).

export interface ServerEvent {
  event: string;
  id: string;
  data: string;
}

/** The events of a text/event-stream body, in order, until it ends. */
export async function* serverEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let event = '';
  let id = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffered += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const lines = buffered.split(/\r\n|\r|\n/);
      // The last piece may be a line still arriving; at the end there is none.
      buffered = done ? '' : (lines.pop() ?? '');
      for (const line of lines) {
        if (line === '') {
          if (data.length > 0) yield { event: event || 'message', id, data: data.join('\n') };
          event = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const text = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = text;
        else if (field === 'data') data.push(text);
        else if (field === 'id' && !text.includes('\0')) id = text;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}
