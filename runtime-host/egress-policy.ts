// Where a function's outbound request may go: public unicast addresses only. Everything else is
// refused: this machine (loopback, unspecified), private and shared networks, link-local (cloud
// metadata services among them), unique-local IPv6 (fc00::/7, fd00:ec2::254 included), multicast,
// broadcast, documentation and reserved ranges, and IPv6 forms that carry an IPv4 address (mapped,
// NAT64, 6to4, Teredo), which are judged as the refused ranges they could reach. ipaddr.js knows the
// ranges; only its 'unicast' is allowed.
import ipaddr from 'ipaddr.js';

/** Why `address` may not be reached, or null when it is public unicast. */
export function refusal(address: string): string | null {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return `${address} is not an IP address`;
  }
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress())
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  return range === 'unicast'
    ? null
    : `${parsed.toString()} is in the ${RANGE_NAMES[range] ?? range} range, not a public address`;
}

const RANGE_NAMES: Record<string, string> = {
  unspecified: 'unspecified',
  loopback: 'loopback',
  private: 'private network',
  carrierGradeNat: 'shared (carrier-grade NAT)',
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  multicast: 'multicast',
  broadcast: 'broadcast',
  reserved: 'reserved',
  rfc6052: 'NAT64',
  '6to4': '6to4',
  teredo: 'Teredo',
  benchmarking: 'benchmarking',
  amt: 'AMT',
  as112: 'AS112',
  deprecated: 'deprecated',
  orchid2: 'ORCHIDv2',
};

/** A URL's host as an address when it is one (the WHATWG parser already turned 0x7f.1 into 127.0.0.1). */
export function literalAddress(hostname: string): string | null {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return ipaddr.isValid(bare) ? bare : null;
}
