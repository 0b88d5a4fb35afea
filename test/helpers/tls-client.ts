// TLS clients of the tests' HTTPS listeners (Berth's own, or Caddy's): every name resolves to 127.0.0.1,
// as the test DNS server says, and the only CA trusted is the test's (pebble's root).
import type { LookupAddress } from 'node:dns';
import tls from 'node:tls';
import got, { type Got } from 'got';

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

function loopback(_hostname: string, options: unknown, callback?: LookupCallback): void {
  const done = (typeof options === 'function' ? options : callback) as LookupCallback;
  if (typeof options === 'object' && options !== null && (options as { all?: boolean }).all)
    done(null, [{ address: '127.0.0.1', family: 4 }]);
  else done(null, '127.0.0.1', 4);
}

/** An HTTPS client trusting `ca` only, reaching every name at 127.0.0.1; redirects are answers. */
export const httpsClient = (ca: string): Got =>
  got.extend({
    https: { certificateAuthority: ca },
    dnsLookup: loopback as never,
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
    timeout: { request: 30_000 },
  });

export interface Peer {
  serialNumber: string;
  subjectaltname: string;
  validTo: string;
}

/** The certificate 127.0.0.1:`port` shows for `servername`, checked against `ca`; rejects when it shows none. */
export function peerCertificate(port: number, servername: string, ca: string): Promise<Peer> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, ca, timeout: 30_000 }, () => {
      const cert = socket.getPeerCertificate();
      socket.end();
      resolve({ serialNumber: cert.serialNumber, subjectaltname: cert.subjectaltname ?? '', validTo: cert.valid_to });
    });
    socket.once('error', reject);
    socket.once('timeout', () => socket.destroy(new Error('the handshake timed out')));
  });
}
