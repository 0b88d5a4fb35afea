// Subdomain rules: DNS labels of lowercase letters, digits and hyphens, 3–63 long (the `Subdomain`
// schema in schemas.ts), minus names the platform keeps for itself. Generated names add a random suffix
// so they never collide with a brand.
import crypto from 'node:crypto';

export const RESERVED_SUBDOMAINS: ReadonlySet<string> = new Set([
  'abuse',
  'account',
  'accounts',
  'admin',
  'administrator',
  'api',
  'app',
  'assets',
  'auth',
  'berth',
  'billing',
  'cdn',
  'console',
  'control',
  'dashboard',
  'dns',
  'docs',
  'ftp',
  'help',
  'hostmaster',
  'imap',
  'internal',
  'localhost',
  'login',
  'mail',
  'mcp',
  'ns1',
  'ns2',
  'pop',
  'postmaster',
  'root',
  'security',
  'smtp',
  'static',
  'status',
  'support',
  'system',
  'webmaster',
  'www',
]);

const SUFFIX_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A candidate subdomain for a site name: a readable slug plus six random characters. */
export function generateSubdomain(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/g, '');
  const bytes = crypto.randomBytes(6);
  const suffix = Array.from(bytes, (b) => SUFFIX_ALPHABET[b % SUFFIX_ALPHABET.length]).join('');
  return `${slug || 'site'}-${suffix}`;
}

/**
 * A preview host's first label: a deployment's short id (8 of [a-z0-9]) or `t` and an instant in Unix
 * milliseconds (13 digits), then `--` and the site's subdomain. Nothing else reads as a preview.
 */
const PREVIEW_LABEL = /^([a-z0-9]{8}|t[0-9]{13})--([a-z0-9-]+)$/;

/** The preview and the subdomain a first label names, if it is a preview host's. */
export function previewOf(label: string): { preview: string; subdomain: string } | null {
  // Most names have no "--": they cost no regular expression.
  const match = label.includes('--') ? PREVIEW_LABEL.exec(label) : null;
  return match ? { preview: match[1]!, subdomain: match[2]! } : null;
}
