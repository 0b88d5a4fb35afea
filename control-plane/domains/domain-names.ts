// What a custom domain may be: a public DNS name, written one way. A hostname is normalised once (lower
// case, IDN to punycode, no trailing dot, no port) so that one name has one row; a name that is not on
// the public DNS (an IP literal, a single label, `localhost`, a suffix no registry hands out such as
// `.local` or `.internal`, or a public suffix itself such as `co.uk`) can never be verified and is refused,
// and so are the instance's own names, which no site may take.
import { domainToASCII } from 'node:url';
import { parse } from 'tldts';
import { BerthError } from '../errors.ts';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

function invalid(message: string): never {
  throw new BerthError('invalid_hostname', message);
}

/** The hostname as it is stored and compared; throws invalid_hostname for what is no DNS name at all. */
export function normaliseHostname(input: string): string {
  const raw = input.trim();
  if (!raw) invalid('a hostname is required, such as shop.example.com');
  if (/[/?#@\s]/.test(raw))
    invalid(`"${raw}" is a hostname with more around it: give the name alone, such as shop.example.com`);
  // A port is not part of a name; an IPv6 literal in brackets is refused below as an address.
  const withoutPort = /^[^:]+:\d+$/.test(raw) ? raw.slice(0, raw.lastIndexOf(':')) : raw;
  const ascii = domainToASCII(withoutPort.replace(/\.$/, ''));
  if (!ascii) invalid(`"${raw}" is not a valid hostname`);
  if (ascii.length > 253) invalid('a hostname has at most 253 characters');
  const labels = ascii.split('.');
  if (!labels.every((label) => LABEL.test(label))) {
    invalid(
      `"${raw}" is not a valid hostname: each label is 1–63 letters, digits and hyphens, not starting or ending with one`,
    );
  }
  return ascii;
}

/** Whether a normalised name can be a name on the public DNS: not an address, under a public suffix, not one. */
export function publicNameProblem(hostname: string): string | null {
  const parsed = parse(hostname, { allowPrivateDomains: false });
  if (parsed.isIp || /^[\d.]+$/.test(hostname) || hostname.startsWith('[')) return 'an IP address is not a domain';
  if (!hostname.includes('.')) return 'a single-label name is not a public domain';
  if (!parsed.isIcann) return `.${parsed.publicSuffix ?? hostname} is not a public top-level domain`;
  if (!parsed.domain) return `${hostname} is a public suffix, not a domain someone can own`;
  return null;
}

/** The names an instance keeps for itself: its own host, and everything at or under the site host. */
export interface ReservedNames {
  siteHost: string;
  /** The control plane's hostname, from BERTH_PUBLIC_URL; empty when unset. */
  instanceHost: string;
}

/**
 * The stored form of a custom domain a site asks for; throws invalid_hostname or domain_reserved.
 */
export function customDomainName(input: string, reserved: ReservedNames): string {
  const hostname = normaliseHostname(input);
  const problem = publicNameProblem(hostname);
  if (problem) invalid(problem);
  const siteHost = reserved.siteHost.toLowerCase();
  if (hostname === siteHost || hostname.endsWith(`.${siteHost}`)) {
    throw new BerthError(
      'domain_reserved',
      `${hostname} is under the instance's site host; sites have those names already`,
    );
  }
  if (reserved.instanceHost && hostname === reserved.instanceHost.toLowerCase()) {
    throw new BerthError('domain_reserved', `${hostname} is the instance's own host`);
  }
  return hostname;
}
