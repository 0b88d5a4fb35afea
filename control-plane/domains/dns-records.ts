// TXT look-ups for domain verification, through the system's resolver or the servers in
// BERTH_DNS_SERVERS (tests and split-horizon setups use their own). A name with no record and a name
// that does not exist are both "no records"; a resolver that fails is said so, with its code.
import { promises as dns } from 'node:dns';

export type TxtAnswer = { records: string[] } | { failed: string };

const NO_RECORDS = new Set<string>([dns.NODATA, dns.NOTFOUND]);

export async function txtRecords(servers: readonly string[], name: string): Promise<TxtAnswer> {
  const resolver = new dns.Resolver({ timeout: 3000, tries: 2 });
  if (servers.length > 0) resolver.setServers([...servers]);
  try {
    // A record longer than 255 bytes arrives in chunks: one string each.
    return { records: (await resolver.resolveTxt(name)).map((chunks) => chunks.join('')) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'an unknown error';
    if (NO_RECORDS.has(code)) return { records: [] };
    return { failed: `the DNS look-up of ${name} failed (${code})` };
  }
}
