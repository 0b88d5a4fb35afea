// The certificates Berth got, in the metadata so every node serves them: the PEM chain as the CA issued
// it, and its key sealed with the master key (bound to the name, so a sealed key cannot be moved to
// another row). A certificate is due for renewal when a third of its lifetime is left, or 30 days if
// that is less: Let's Encrypt's 90-day certificates renew 30 days before they end, a short-lived test
// certificate renews in time too.
import crypto from 'node:crypto';
import { open, seal } from '../../storage/master-key.ts';
import type { Deps } from '../deps.ts';

const RENEW_BEFORE_MS = 30 * 24 * 3600_000;

export interface StoredCertificate {
  hostname: string;
  /** The leaf first, then the chain to the root. */
  certificate: string;
  key: string;
  notBefore: Date;
  notAfter: Date;
  renewAt: Date;
}

interface CertificateRow {
  hostname: string;
  certificate: string;
  key_sealed: string;
  not_before: string;
  not_after: string;
  renew_at: string;
}

const keyContext = (hostname: string) => `tls-key:${hostname}`;

/** When a certificate valid from `notBefore` to `notAfter` is renewed. */
export function renewAtOf(notBefore: Date, notAfter: Date): Date {
  const lifetime = notAfter.getTime() - notBefore.getTime();
  return new Date(notAfter.getTime() - Math.min(RENEW_BEFORE_MS, lifetime / 3));
}

export async function readCertificate(
  deps: Pick<Deps, 'db' | 'masterKey'>,
  hostname: string,
): Promise<StoredCertificate | undefined> {
  const row = await deps.db<CertificateRow>('tls_certificates').where({ hostname }).first();
  if (!row) return undefined;
  return {
    hostname,
    certificate: row.certificate,
    key: open(deps.masterKey, row.key_sealed, keyContext(hostname)),
    notBefore: new Date(row.not_before),
    notAfter: new Date(row.not_after),
    renewAt: new Date(row.renew_at),
  };
}

/** Stores a newly issued certificate in place of the name's previous one. */
export async function saveCertificate(
  deps: Pick<Deps, 'db' | 'masterKey' | 'now'>,
  hostname: string,
  certificate: string,
  key: string,
): Promise<StoredCertificate> {
  const leaf = new crypto.X509Certificate(certificate);
  const notBefore = leaf.validFromDate;
  const notAfter = leaf.validToDate;
  const renewAt = renewAtOf(notBefore, notAfter);
  const row = {
    hostname,
    certificate,
    key_sealed: seal(deps.masterKey, key, keyContext(hostname)),
    not_before: notBefore.toISOString(),
    not_after: notAfter.toISOString(),
    renew_at: renewAt.toISOString(),
    issued_at: deps.now().toISOString(),
  };
  await deps.db('tls_certificates').insert(row).onConflict('hostname').merge();
  return { hostname, certificate, key, notBefore, notAfter, renewAt };
}

/** The names whose certificates are due for renewal now. */
export async function dueForRenewal(deps: Pick<Deps, 'db' | 'now'>): Promise<string[]> {
  const rows = await deps
    .db<CertificateRow>('tls_certificates')
    .where('renew_at', '<=', deps.now().toISOString())
    .orderBy('not_after')
    .select('hostname');
  return rows.map((row) => row.hostname);
}

/**
 * Forgets what has ended: certificates past their end (a name no longer served is not renewed, and its
 * certificate goes once it ends), and the order rows of names that hold no certificate, no lease and no
 * back-off still running. A back-off still running is kept, whatever the name.
 */
export async function removeEnded(deps: Pick<Deps, 'db' | 'now'>): Promise<number> {
  const now = deps.now().toISOString();
  const ended = await deps.db('tls_certificates').where('not_after', '<=', now).delete();
  await deps
    .db('tls_orders')
    .whereNotExists(
      (q) =>
        void q
          .select(deps.db.raw('1'))
          .from('tls_certificates')
          .whereRaw('tls_certificates.hostname = tls_orders.hostname'),
    )
    .andWhere((q) => void q.whereNull('lease_expires_at').orWhere('lease_expires_at', '<=', now))
    .andWhere((q) => void q.whereNull('retry_at').orWhere('retry_at', '<=', now))
    .delete();
  return ended;
}
