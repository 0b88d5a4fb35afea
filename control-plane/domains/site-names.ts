// Which site a request's Host names: `<subdomain>.<site host>`, or a verified custom domain. The ACTIVE
// custom domains are held in memory whole (a row each, loaded at start and again on every `domains`
// change of the feed), so a Host that is no site's costs a map lookup and no query, however many
// random names a scanner sends. While a reload is in flight, routing waits for it: a server that has
// just verified a domain serves it on the next request.
import net from 'node:net';
import type { Knex } from 'knex';
import type { Change, ChangeListener } from '../db/changes.ts';
import type { Logger } from '../log.ts';
import { previewOf } from '../services/subdomains.ts';

declare module '../deps.ts' {
  interface Deps {
    /** Which site a Host names: subdomains and the ACTIVE custom domains. */
    siteNames: SiteNames;
  }
}

export interface ActiveDomain {
  hostname: string;
  siteId: string;
  subdomain: string;
}

interface Canonical {
  hostname: string;
  /** The site's subdomain host answers with a redirect too. */
  redirectSubdomain: boolean;
}

/** Where a request goes, by its Host. */
export type HostRoute =
  | { to: 'control' }
  /** A name that is no site's and not the control plane's: answered 404 with nothing of any site. */
  | { to: 'unknown' }
  /**
   * A site, reached at its subdomain or at `domain`, one of its ACTIVE custom domains; or `preview`, a
   * preview host `<preview>--<subdomain>.<site host>` (deployments/previews.ts says what it serves).
   */
  | { to: 'site'; subdomain: string; domain?: string; preview?: string }
  /** Another name of a site that has a canonical one: 308 to `hostname`, path and query kept. */
  | { to: 'redirect'; subdomain: string; hostname: string };

type DomainRow = ActiveDomain & { canonical: boolean | number; redirectSubdomain: boolean | number };

const RETRY_MS = 1000;

/** The names the control plane answers at. */
export interface ControlPlaneHosts {
  siteHost: string;
  /**
   * BERTH_PUBLIC_URL's hostname. When set, the control plane answers there, at the site host, at
   * addresses and at `localhost` (health checks, local tools) and nowhere else: a name that points here
   * but is no site's (a domain removed, or not yet verified) shows nothing of Berth. Empty: every name
   * that is no site's is the control plane's.
   */
  instanceHost: string;
}

function isControlPlane(name: string, hosts: ControlPlaneHosts): boolean {
  if (!hosts.instanceHost || name === hosts.instanceHost || name === hosts.siteHost) return true;
  return name === '' || name === 'localhost' || net.isIP(name.replace(/^\[|\]$/g, '')) !== 0;
}

/** The name part of a Host header: lower case, no port, no trailing dot. */
export function hostName(host: string | undefined): string {
  if (!host) return '';
  const name = host.toLowerCase();
  const bare = name.startsWith('[') ? name.slice(0, name.indexOf(']') + 1) : name.replace(/:\d*$/, '');
  return bare.replace(/\.$/, '');
}

export class SiteNames implements ChangeListener {
  #domains = new Map<string, ActiveDomain>();
  /** The canonical ACTIVE domain of each site that named one, by the site's subdomain. */
  #canonical = new Map<string, Canonical>();
  #generation = 0;
  #loading: Promise<void> | null = null;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    private readonly db: Knex,
    private readonly hosts: ControlPlaneHosts,
    private readonly log: Logger,
  ) {}

  /** Loads the table; a start that cannot read it fails. */
  async start(): Promise<void> {
    this.#apply(await this.#read());
  }

  stop(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
  }

  change(change: Change): void {
    if (change.kind === 'domains') void this.reload();
  }

  resync(): void {
    void this.reload();
  }

  /** Reads the table again; requests routed meanwhile wait for the newest read. */
  reload(): Promise<void> {
    const generation = ++this.#generation;
    clearTimeout(this.#retry);
    const loading = this.#read().then(
      (rows) => {
        if (generation !== this.#generation) return;
        this.#apply(rows);
        this.#loading = null;
      },
      (err: unknown) => {
        if (generation !== this.#generation) return;
        // Serve what was known rather than hold every request; read again shortly.
        this.#loading = null;
        this.log.warn({ err }, 'could not read the custom domains; serving the ones known, reading again shortly');
        if (!this.#closed) this.#retry = setTimeout(() => void this.reload(), RETRY_MS).unref();
      },
    );
    this.#loading = loading;
    return loading;
  }

  /** The ACTIVE custom domain of this name, if there is one. */
  async domain(hostname: string): Promise<ActiveDomain | undefined> {
    while (this.#loading !== null) await this.#loading;
    return this.#domains.get(hostname);
  }

  /** Where a request with this Host header goes. */
  route(host: string | undefined): HostRoute | Promise<HostRoute> {
    if (this.#loading !== null) return this.#afterLoad(host);
    const name = hostName(host);
    const suffix = `.${this.hosts.siteHost}`;
    if (name.endsWith(suffix)) {
      const subdomain = name.slice(0, -suffix.length);
      // A preview host is never redirected to a canonical name: it is the deployment's own address.
      const preview = previewOf(subdomain);
      if (preview) return { to: 'site', ...preview };
      const canonical = this.#canonical.get(subdomain);
      return canonical?.redirectSubdomain
        ? { to: 'redirect', subdomain, hostname: canonical.hostname }
        : { to: 'site', subdomain };
    }
    const domain = this.#domains.get(name);
    if (!domain) return isControlPlane(name, this.hosts) ? { to: 'control' } : { to: 'unknown' };
    const canonical = this.#canonical.get(domain.subdomain);
    if (canonical && canonical.hostname !== name) {
      return { to: 'redirect', subdomain: domain.subdomain, hostname: canonical.hostname };
    }
    return { to: 'site', subdomain: domain.subdomain, domain: name };
  }

  async #afterLoad(host: string | undefined): Promise<HostRoute> {
    while (this.#loading !== null) await this.#loading;
    return this.route(host);
  }

  async #read(): Promise<DomainRow[]> {
    return (await this.db('site_domains')
      .join('sites', 'sites.id', 'site_domains.site_id')
      .where('site_domains.status', 'ACTIVE')
      .select(
        'site_domains.hostname as hostname',
        'site_domains.site_id as siteId',
        'sites.subdomain as subdomain',
        'site_domains.canonical as canonical',
        'site_domains.redirect_subdomain as redirectSubdomain',
      )) as DomainRow[];
  }

  #apply(rows: DomainRow[]): void {
    const domains = new Map<string, ActiveDomain>();
    const canonical = new Map<string, Canonical>();
    for (const row of rows) {
      domains.set(row.hostname, { hostname: row.hostname, siteId: row.siteId, subdomain: row.subdomain });
      if (row.canonical) {
        canonical.set(row.subdomain, { hostname: row.hostname, redirectSubdomain: Boolean(row.redirectSubdomain) });
      }
    }
    this.#domains = domains;
    this.#canonical = canonical;
  }
}
