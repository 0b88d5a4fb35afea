// HTTPS by Berth itself (BERTH_TLS=acme), a part of the start when it is on, started once every other
// part is: the directory's trust, the leftover leases of this node's previous process released, the
// orderer, the certificates every handshake asks (following the change feed), the renewal job, and the
// two public listeners (HTTPS, and port 80 for the CA's challenges and redirects) given the request
// handler the main listener uses.
import type { Part } from '../part.ts';
import { Certificates } from './certificates.ts';
import { trustDirectoryCa } from './directory-trust.ts';
import { tlsListeners } from './listeners.ts';
import { releaseLeftoverOrders } from './order-leases.ts';
import { Orderer } from './orderer.ts';
import { Renewals } from './renewals.ts';

export function tlsPart(): Part {
  let certificates: Certificates | undefined;
  return {
    name: 'HTTPS',
    async start(deps, stack) {
      const tls = deps.config.tls;
      if (!tls) return;
      if (tls.caFile) {
        const untrust = trustDirectoryCa(tls.directory, tls.caFile);
        stack.defer('the ACME directory’s trust', untrust);
      }
      const released = await releaseLeftoverOrders(deps);
      if (released > 0) deps.log.warn({ released }, 'released the certificate orders the previous process left');
      const orderer = new Orderer(deps, tls);
      stack.defer('the certificate orders', () => orderer.close());
      certificates = new Certificates(deps, orderer);
      deps.changes.subscribe(certificates);
      const renewals = new Renewals(deps, orderer);
      renewals.start(tls.renewCheckMs);
      stack.defer('the certificate renewals', () => renewals.stop());
    },
    serves(deps, handle) {
      const tls = deps.config.tls;
      if (!tls || !certificates) return [];
      const listeners = tlsListeners(deps, certificates, tls.httpsPort, handle);
      const bind = 'BERTH_TLS_BIND';
      return [
        {
          server: listeners.http,
          host: tls.bind,
          port: tls.httpPort,
          names: { port: 'BERTH_HTTP_PORT', bind },
          kind: 'public',
        },
        {
          server: listeners.https,
          host: tls.bind,
          port: tls.httpsPort,
          names: { port: 'BERTH_HTTPS_PORT', bind },
          kind: 'public',
        },
      ];
    },
  };
}
