// What Berth answers on port 80 with BERTH_TLS=acme: the CA's HTTP-01 requests for the challenges in
// flight (any node's, from the metadata), and a 308 to the same host, path and query over HTTPS for
// everything else.
import type http from 'node:http';
import type { Deps } from '../deps.ts';
import { hostName } from '../domains/site-names.ts';
import { CHALLENGE_PREFIX, keyAuthorization } from './challenges.ts';

const TOKEN = /^[A-Za-z0-9_-]{1,256}$/;
const HOST = /^([a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/;

function answer(res: http.ServerResponse, status: number, body: string, headers: http.OutgoingHttpHeaders = {}) {
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(body);
}

export function port80Handler(
  deps: Pick<Deps, 'db' | 'log'>,
  httpsPort: number,
): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  const portPart = httpsPort === 443 ? '' : `:${httpsPort}`;
  return (req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith(CHALLENGE_PREFIX) && (req.method === 'GET' || req.method === 'HEAD')) {
      const token = url.slice(CHALLENGE_PREFIX.length);
      if (!TOKEN.test(token)) return answer(res, 404, 'no such challenge\n');
      keyAuthorization(deps, token).then(
        (found) => (found ? answer(res, 200, found) : answer(res, 404, 'no such challenge\n')),
        (err: unknown) => {
          deps.log.warn({ err }, 'could not read an ACME challenge');
          answer(res, 503, 'try again\n');
        },
      );
      return;
    }
    const host = hostName(req.headers.host);
    if (!HOST.test(host)) return answer(res, 400, 'a Host header names the site\n');
    const path = url.startsWith('/') ? url : '/';
    answer(res, 308, `https://${host}${portPart}${path}\n`, { Location: `https://${host}${portPart}${path}` });
  };
}
