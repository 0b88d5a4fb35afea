// Who orders a name's certificate, and when it may be ordered again. One node orders a name at a time:
// it takes the name's lease (a row of tls_orders with an expiry) in a transaction that takes turns with
// every other one for that name. A failed order sets the name's back-off, growing with each failure
// (5 minutes, doubling, at most a day), so a name whose validation fails cannot spend the CA's limits
// (Let's Encrypt allows 5 failed validations per hostname an hour) whichever node or handshake asks.
import { lockName } from '../db/locks.ts';
import { leftByThisNode } from '../db/node-work.ts';
import type { Deps } from '../deps.ts';

/** Longest an order may hold its lease: validations and the CA's queue, with room to spare. */
const LEASE_MS = 3 * 60_000;
const FIRST_BACKOFF_MS = 5 * 60_000;
const MAX_BACKOFF_MS = 24 * 3600_000;

interface OrderRow {
  hostname: string;
  node_id: string | null;
  lease_expires_at: string | null;
  failures: number;
  failed_at: string | null;
  retry_at: string | null;
  last_error: string | null;
}

export type Lease = { taken: true } | { taken: false; reason: 'busy' | 'backoff'; until: Date };

type LeaseDeps = Pick<Deps, 'db' | 'now' | 'nodeId'>;

/** The back-off after the `failures`-th failure in a row. */
export const backoffMs = (failures: number): number =>
  Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** Math.max(0, failures - 1));

/** Takes the name's lease, unless another node holds a live one or the name is backing off. */
export async function takeLease(deps: LeaseDeps, hostname: string): Promise<Lease> {
  const now = deps.now();
  return deps.db.transaction(async (trx) => {
    await lockName(trx, `tls-order:${hostname}`);
    const row = (await trx<OrderRow>('tls_orders').where({ hostname }).first()) as OrderRow | undefined;
    if (row?.lease_expires_at && Date.parse(row.lease_expires_at) > now.getTime())
      return { taken: false, reason: 'busy', until: new Date(row.lease_expires_at) } as const;
    if (row?.retry_at && Date.parse(row.retry_at) > now.getTime())
      return { taken: false, reason: 'backoff', until: new Date(row.retry_at) } as const;
    const lease = { node_id: deps.nodeId, lease_expires_at: new Date(now.getTime() + LEASE_MS).toISOString() };
    if (row) await trx('tls_orders').where({ hostname }).update(lease);
    else await trx('tls_orders').insert({ hostname, failures: 0, ...lease });
    return { taken: true } as const;
  });
}

/** The order succeeded: the lease and any back-off end. */
export async function orderSucceeded(deps: LeaseDeps, hostname: string): Promise<void> {
  await deps
    .db('tls_orders')
    .where({ hostname, node_id: deps.nodeId })
    .update({ node_id: null, lease_expires_at: null, failures: 0, failed_at: null, retry_at: null, last_error: null });
}

/** The order failed: the lease ends and the name backs off longer than after its previous failure. */
export async function orderFailed(deps: LeaseDeps, hostname: string, error: string): Promise<Date> {
  const now = deps.now();
  return deps.db.transaction(async (trx) => {
    await lockName(trx, `tls-order:${hostname}`);
    const row = (await trx<OrderRow>('tls_orders').where({ hostname }).first()) as OrderRow | undefined;
    const failures = (row?.failures ?? 0) + 1;
    const retryAt = new Date(now.getTime() + backoffMs(failures));
    await trx('tls_orders')
      .where({ hostname })
      .update({
        node_id: null,
        lease_expires_at: null,
        failures,
        failed_at: now.toISOString(),
        retry_at: retryAt.toISOString(),
        last_error: error.slice(0, 500),
      });
    return retryAt;
  });
}

export interface FailingRenewal {
  hostname: string;
  /** When the certificate still serving ends. */
  notAfter: string;
  failures: number;
  failedAt: string;
  retryAt: string;
  error: string;
}

/** Names holding a certificate whose last renewal failed: the old one serves until it ends. */
export async function failingRenewals(deps: Pick<Deps, 'db'>): Promise<FailingRenewal[]> {
  const rows = (await deps
    .db('tls_orders')
    .join('tls_certificates', 'tls_certificates.hostname', 'tls_orders.hostname')
    .where('tls_orders.failures', '>', 0)
    .orderBy('tls_certificates.not_after')
    .select(
      'tls_orders.hostname as hostname',
      'tls_certificates.not_after as notAfter',
      'tls_orders.failures as failures',
      'tls_orders.failed_at as failedAt',
      'tls_orders.retry_at as retryAt',
      'tls_orders.last_error as error',
    )) as FailingRenewal[];
  return rows.map((row) => ({ ...row, failures: Number(row.failures) }));
}

/** Ends the leases this node's previous process held when it stopped mid-order; back-offs stay. */
export async function releaseLeftoverOrders(deps: Pick<Deps, 'db' | 'nodeId'>): Promise<number> {
  return leftByThisNode(deps.db, 'tls_orders', deps.nodeId)
    .whereNotNull('lease_expires_at')
    .update({ node_id: null, lease_expires_at: null });
}
