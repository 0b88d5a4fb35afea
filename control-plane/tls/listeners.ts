// The listeners of HTTPS by Berth itself: HTTPS with each handshake's certificate from `Certificates`,
// answered by the same request handler as the plain listener, and port 80 (port-80.ts). Not yet
// listening: server.ts listens on them and closes them with the plain one.
import http from 'node:http';
import https from 'node:https';
import type { Deps } from '../deps.ts';
import type { Certificates } from './certificates.ts';
import { port80Handler } from './port-80.ts';

export interface TlsListeners {
  https: https.Server;
  http: http.Server;
}

export function tlsListeners(
  deps: Pick<Deps, 'db' | 'log'>,
  certificates: Certificates,
  httpsPort: number,
  handle: http.RequestListener,
): TlsListeners {
  const secure = https.createServer({ SNICallback: certificates.sni, minVersion: 'TLSv1.2' }, handle);
  secure.keepAliveTimeout = 65_000;
  // A handshake refused (an unknown name, a scanner, a client gone) ends its connection; nothing to log.
  secure.on('tlsClientError', () => {});
  const plain = http.createServer(port80Handler(deps, httpsPort));
  return { https: secure, http: plain };
}
