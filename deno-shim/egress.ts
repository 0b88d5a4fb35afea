// A function's fetch, through Berth's egress proxy (runtime-host/egress-proxy.ts): the worker may
// connect to the proxy and nowhere else (its --allow-net), so every http(s) request goes there, with
// its real target and the worker's grant in headers the proxy removes. The proxy checks each target,
// redirects included: it never follows one itself; this fetch follows them, each hop asked anew.
// Other schemes (data:, blob:) are fetched as Deno does.

import type { EgressRoute } from '../runtime-host/protocol.ts';

const MAX_REDIRECTS = 20;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** The error fetch throws for a network failure, with the proxy's reason and a stable code. */
function networkError(message: string, code: string): TypeError {
  return Object.assign(new TypeError(message), { code });
}

export function routeFetchThroughEgress(route: EgressRoute): void {
  const direct = globalThis.fetch;

  async function fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    let request = new Request(input, init);
    if (!request.url.startsWith('http:') && !request.url.startsWith('https:')) return direct(request);
    const mode = request.redirect;
    // A body given whole (text, bytes, a form) can go again after a 307 or 308; a stream cannot.
    const resendable = init?.body instanceof ReadableStream ? undefined : (init?.body ?? undefined);
    for (let hop = 0; ; hop++) {
      const url = request.url;
      const { method, signal } = request;
      const sent = new Headers(request.headers);
      const hadBody = request.body !== null;
      const headers = new Headers(sent);
      headers.set('x-berth-egress-url', url);
      headers.set('x-berth-egress-token', route.token);
      const response = await direct(route.url, {
        method,
        headers,
        body: request.body,
        redirect: 'manual',
        signal,
        // Request bodies stream to the proxy as they are read.
        duplex: 'half',
      } as RequestInit);
      const refused = response.headers.get('x-berth-egress-refused') ?? response.headers.get('x-berth-egress-failed');
      if (refused !== null)
        throw networkError(
          `fetch of ${url} ${response.status === 403 ? 'refused' : 'failed'}: ${await response.text()}`,
          refused,
        );
      const location = response.headers.get('location');
      if (!REDIRECTS.has(response.status) || location === null || mode === 'manual')
        return answered(response, url, hop > 0);
      await response.body?.cancel();
      if (mode === 'error')
        throw networkError(`fetch of ${url} was redirected, and its redirect mode is "error"`, 'EGRESS_REDIRECT');
      if (hop + 1 > MAX_REDIRECTS)
        throw networkError(`fetch of ${url} was redirected more than ${MAX_REDIRECTS} times`, 'EGRESS_REDIRECT');
      const target = new URL(location, url).href;
      // As fetch does: a 303 (or a 301 or 302 after a POST) goes on as a GET without the body.
      const toGet =
        (response.status === 303 && method !== 'HEAD') ||
        ((response.status === 301 || response.status === 302) && method === 'POST');
      if (toGet || !hadBody) {
        request = new Request(target, {
          method: toGet ? 'GET' : method,
          headers: toGet ? withoutBodyHeaders(sent) : sent,
          signal,
        });
      } else if (resendable !== undefined) {
        request = new Request(target, { method, headers: sent, body: resendable, signal });
      } else {
        throw networkError(
          `fetch of ${url} was redirected with ${response.status}, which needs its streamed body sent again`,
          'EGRESS_REDIRECT',
        );
      }
    }
  }

  Object.defineProperty(globalThis, 'fetch', { value: fetch, writable: true, configurable: true, enumerable: true });
}

function withoutBodyHeaders(headers: Headers): Headers {
  const out = new Headers(headers);
  for (const name of ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location'])
    out.delete(name);
  return out;
}

/** The proxy's answer as the target's: its URL and whether it was reached by a redirect. */
function answered(response: Response, url: string, redirected: boolean): Response {
  const out = new Response(response.body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  Object.defineProperties(out, { url: { value: url }, redirected: { value: redirected } });
  return out;
}
