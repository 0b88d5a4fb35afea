// Gets a served name its certificate: takes the name's lease (one node orders a name at a time), orders
// it from the CA, stores it and tells every node through the change feed; a failure backs the name off.
// A node remembers the back-offs it has seen, so a handshake for a backing-off name costs no query. Two
// handshakes on one node wait for the same order.
import type * as acme from 'acme-client';
import type { TlsConfig } from '../config.ts';
import type { Deps } from '../deps.ts';
import { acmeClient } from './acme-account.ts';
import { orderCertificate } from './acme-order.ts';
import { saveCertificate } from './certificate-store.ts';
import { orderFailed, orderSucceeded, takeLease } from './order-leases.ts';

/** issued: stored now; busy: another node is ordering it; backoff: it failed lately; failed: it failed now. */
export type OrderOutcome = 'issued' | 'busy' | 'backoff' | 'failed';

export type OrdererDeps = Pick<Deps, 'db' | 'masterKey' | 'now' | 'nodeId' | 'changes' | 'log' | 'metrics'>;

/** The first line of an error, short: what the CA or the network said. */
const reason = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);

export class Orderer {
  #client: Promise<acme.Client> | null = null;
  readonly #inFlight = new Map<string, Promise<OrderOutcome>>();
  /** Until when each name backs off, as last seen in the metadata. */
  readonly #backoff = new Map<string, number>();
  #closed = false;

  constructor(
    private readonly deps: OrdererDeps,
    private readonly tls: TlsConfig,
  ) {}

  /** Orders the name's certificate, unless another node is at it or the name is backing off. */
  obtain(hostname: string): Promise<OrderOutcome> {
    let order = this.#inFlight.get(hostname);
    if (!order) {
      order = this.#obtain(hostname).finally(() => this.#inFlight.delete(hostname));
      this.#inFlight.set(hostname, order);
    }
    return order;
  }

  /** Starts no more orders and waits for the ones in flight. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled(this.#inFlight.values());
  }

  async #obtain(hostname: string): Promise<OrderOutcome> {
    const { deps } = this;
    if (this.#closed) return 'busy';
    if ((this.#backoff.get(hostname) ?? 0) > deps.now().getTime()) return 'backoff';
    const lease = await takeLease(deps, hostname);
    if (!lease.taken) {
      if (lease.reason === 'backoff') this.#backoff.set(hostname, lease.until.getTime());
      return lease.reason;
    }
    try {
      const { certificate, key } = await orderCertificate(deps, await this.#account(), hostname);
      await saveCertificate(deps, hostname, certificate, key);
      await orderSucceeded(deps, hostname);
    } catch (err) {
      const retryAt = await orderFailed(deps, hostname, reason(err));
      this.#backoff.set(hostname, retryAt.getTime());
      deps.metrics.tlsOrder('failed');
      deps.log.warn(
        { hostname, err: reason(err), retryAt: retryAt.toISOString() },
        'could not get a certificate; the name is not ordered again before retryAt',
      );
      return 'failed';
    }
    this.#backoff.delete(hostname);
    deps.metrics.tlsOrder('issued');
    deps.log.info({ hostname }, 'got a certificate');
    await deps.changes.publish({ kind: 'certificate', hostname });
    return 'issued';
  }

  /** The account's client, made once; a failure to make it is tried again at the next order. */
  #account(): Promise<acme.Client> {
    this.#client ??= acmeClient(this.deps, this.tls).catch((err: unknown) => {
      this.#client = null;
      throw err;
    });
    return this.#client;
  }
}
