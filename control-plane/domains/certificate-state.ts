// What a name's certificate is, as the domains API reports it when Berth gets its own certificates
// (BERTH_TLS=acme): issued (until when, and when it renews), not yet (ordered at the first HTTPS visit,
// so only for a name served), or failing (the CA's last answer, and when it is tried again; a failing
// renewal keeps serving the certificate it has).
import type { Deps } from '../deps.ts';

export interface CertificateState {
  status: 'ISSUED' | 'NOT_YET' | 'FAILING';
  notAfter: string | null;
  renewAt: string | null;
  error: string | null;
  retryAt: string | null;
}

interface Row {
  hostname: string;
  not_after: string | null;
  renew_at: string | null;
  failures: number | null;
  last_error: string | null;
  retry_at: string | null;
}

/** The state of each name's certificate, by name. */
export async function certificateStates(
  deps: Pick<Deps, 'db' | 'now'>,
  hostnames: string[],
): Promise<Map<string, CertificateState>> {
  const states = new Map<string, CertificateState>();
  if (hostnames.length === 0) return states;
  const [certificates, orders] = await Promise.all([
    deps.db('tls_certificates').whereIn('hostname', hostnames).select('hostname', 'not_after', 'renew_at'),
    deps.db('tls_orders').whereIn('hostname', hostnames).select('hostname', 'failures', 'last_error', 'retry_at'),
  ]);
  const rows = new Map<string, Row>();
  for (const name of hostnames)
    rows.set(name, {
      hostname: name,
      not_after: null,
      renew_at: null,
      failures: null,
      last_error: null,
      retry_at: null,
    });
  for (const c of certificates as Row[])
    Object.assign(rows.get(c.hostname)!, { not_after: c.not_after, renew_at: c.renew_at });
  for (const o of orders as Row[])
    Object.assign(rows.get(o.hostname)!, { failures: o.failures, last_error: o.last_error, retry_at: o.retry_at });
  const now = deps.now().toISOString();
  for (const row of rows.values()) {
    const valid = row.not_after !== null && row.not_after > now;
    const failing = Number(row.failures ?? 0) > 0;
    states.set(row.hostname, {
      status: failing ? 'FAILING' : valid ? 'ISSUED' : 'NOT_YET',
      notAfter: valid ? row.not_after : null,
      renewAt: valid ? row.renew_at : null,
      error: failing ? row.last_error : null,
      retryAt: failing ? row.retry_at : null,
    });
  }
  return states;
}
