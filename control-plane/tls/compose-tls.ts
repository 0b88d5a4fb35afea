// HTTPS by Berth itself (BERTH_TLS=acme), composed once the rest of Berth is: the directory's trust, the
// leftover leases of this node's previous process released, the orderer, the certificates every
// handshake asks (following the change feed), the renewal job, and the two listeners given the request
// handler the plain listener uses.
import type http from 'node:http';
import type { TlsConfig } from '../config.ts';
import type { Deps } from '../deps.ts';
import { Certificates } from './certificates.ts';
import { trustDirectoryCa } from './directory-trust.ts';
import { type TlsListeners, tlsListeners } from './listeners.ts';
import { releaseLeftoverOrders } from './order-leases.ts';
import { Orderer } from './orderer.ts';
import { Renewals } from './renewals.ts';

export interface ComposedTls extends TlsListeners {
  /** Stops renewing and ordering (orders in flight end first); the listeners are closed by their owner. */
  close(): Promise<void>;
}

export async function composeTls(deps: Deps, tls: TlsConfig, handle: http.RequestListener): Promise<ComposedTls> {
  const untrust = tls.caFile ? trustDirectoryCa(tls.directory, tls.caFile) : () => {};
  try {
    const released = await releaseLeftoverOrders(deps);
    if (released > 0) deps.log.warn({ released }, 'released the certificate orders the previous process left');
  } catch (err) {
    untrust();
    throw err;
  }
  const orderer = new Orderer(deps, tls);
  const certificates = new Certificates(deps, orderer);
  deps.changes.subscribe(certificates);
  const renewals = new Renewals(deps, orderer);
  renewals.start(tls.renewCheckMs);
  return {
    ...tlsListeners(deps, certificates, tls.httpsPort, handle),
    close: async () => {
      await renewals.stop();
      await orderer.close();
      untrust();
    },
  };
}
