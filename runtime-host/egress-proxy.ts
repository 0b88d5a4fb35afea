// The egress proxy: the only address a function worker may connect to (its --allow-net), through
// which the shim sends every outbound fetch (deno-shim/egress.ts). For each request it resolves the
// name itself, refuses the request if any address is not public (egress-policy.ts), connects to the
// address it checked (so a name that changes its answer between check and connect changes nothing),
// and streams the request and the answer through. It counts requests and bytes per site and bounds
// the site's outbound requests in flight. Connections to servers are kept open between requests, as a
// browser or bare Deno keeps them, but each site has its own: no connection ever carries two sites'
// requests, and a site keeps few open while idle.
//
// Deno checks --allow-net against a fetch's target, not the proxy it goes through, so a worker allowed
// to reach only the proxy cannot hand it a CONNECT tunnel: the proxy originates the request itself,
// TLS included (certificates checked against the name), and the worker speaks plain HTTP to it on
// loopback, naming its target and its grant in headers the proxy removes.
import crypto from 'node:crypto';
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { literalAddress, refusal } from './egress-policy.ts';

export const EGRESS_URL_HEADER = 'x-berth-egress-url';
export const EGRESS_TOKEN_HEADER = 'x-berth-egress-token';
/** On the proxy's own answers: why it did not forward the request (refused) or could not (failed). */
export const EGRESS_REFUSED_HEADER = 'x-berth-egress-refused';
export const EGRESS_FAILED_HEADER = 'x-berth-egress-failed';

/** Headers that belong to one connection, never forwarded either way. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

export interface EgressGrant {
  siteId: string;
  /** The function's path in its site, for the site's logs. */
  path: string;
}

export interface EgressObserver {
  /** `abandoned`: the function gave up while its request waited for a turn, so it was never sent. */
  request(siteId: string, outcome: 'forwarded' | 'refused' | 'failed' | 'abandoned'): void;
  bytes(siteId: string, direction: 'out' | 'in', bytes: number): void;
  /** A refusal or failure, told to the site's function logs. */
  log(grant: EgressGrant, message: string): void;
}

export interface EgressOptions {
  /** Requests of one site in flight at most; more wait for a turn. */
  perSite: number;
  /** DNS servers (host or host:port) to resolve names with; empty: the system's resolver. */
  dnsServers: string[];
  /** How long connecting may take, and an answer may stay silent. */
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  observer: EgressObserver;
}

/** Resolves a name to every address it has, with the system's resolver or the configured servers. */
function resolver(servers: string[]): (name: string) => Promise<string[]> {
  if (servers.length === 0)
    return async (name) => (await dns.promises.lookup(name, { all: true, verbatim: true })).map((a) => a.address);
  const custom = new dns.promises.Resolver();
  custom.setServers(servers);
  return async (name) => {
    const found = await Promise.allSettled([custom.resolve4(name), custom.resolve6(name)]);
    const addresses = found.flatMap((result) => (result.status === 'fulfilled' ? result.value : []));
    if (addresses.length === 0) throw new Error(`${name} does not resolve`);
    return addresses;
  };
}

/** How long a kept connection may wait for the site's next request (less when the server says so). */
const KEPT_CONNECTION_MS = 4000;
/** Sites whose kept connections are remembered; the least recently active beyond it close theirs. */
const KEPT_SITES = 1000;

const keptCount = (agent: http.Agent): number =>
  Object.values(agent.freeSockets).reduce((sum, sockets) => sum + (sockets?.length ?? 0), 0);

/**
 * A site's own connections. Node keeps at most `maxFreeSockets` per server; these also keep at most
 * that many for all servers together, so a site that calls many servers holds few connections idle.
 * A kept connection was made to an address checked when it was made, and is reused only for requests
 * to the same name and port, each checked again before it is sent.
 */
class SiteHttpAgent extends http.Agent {
  override keepSocketAlive(socket: Duplex): boolean {
    return keptCount(this) < this.maxFreeSockets && (super.keepSocketAlive(socket) as unknown as boolean);
  }
}
class SiteHttpsAgent extends https.Agent {
  override keepSocketAlive(socket: Duplex): boolean {
    return keptCount(this) < this.maxFreeSockets && (super.keepSocketAlive(socket) as unknown as boolean);
  }
}

/** Closes the connections an agent keeps idle, leaving those in use. */
function closeKept(agent: http.Agent): void {
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

interface SiteAgents {
  http: SiteHttpAgent;
  https: SiteHttpsAgent;
}

/** A lookup that answers the one address already checked, whatever is asked. */
const pinnedTo = (address: string): LookupFunction => {
  const family = address.includes(':') ? 6 : 4;
  return (_hostname, options, callback) => {
    if (options.all)
      (callback as unknown as (err: null, addresses: Array<{ address: string; family: number }>) => void)(null, [
        { address, family },
      ]);
    else callback(null, address, family);
  };
};

/** A request in line for one of its site's turns. */
interface Waiter {
  /** Called when the turn of a request that ended is handed to it. */
  handed(): void;
}

/** Turns for one site's requests. */
class Turns {
  #inFlight = 0;
  /** Those waiting, first come first: each is handed the turn of a request that ends. */
  readonly #waiting = new Set<Waiter>();

  constructor(readonly limit: number) {}

  /** Takes a turn if one is free. */
  take(): boolean {
    if (this.#inFlight >= this.limit) return false;
    this.#inFlight++;
    return true;
  }

  /** Joins the line; `leave` takes the waiter out of it before it is handed a turn. */
  wait(waiter: Waiter): void {
    this.#waiting.add(waiter);
  }

  leave(waiter: Waiter): void {
    this.#waiting.delete(waiter);
  }

  give(): void {
    const [next] = this.#waiting;
    if (!next) {
      this.#inFlight--;
      return;
    }
    this.#waiting.delete(next);
    next.handed();
  }

  get idle(): boolean {
    return this.#inFlight === 0 && this.#waiting.size === 0;
  }
}

/**
 * One request of a function through the proxy. The function may give up at any time (its fetch
 * aborted, or it ended), which the proxy sees as its connection closing: a request waiting for its
 * turn then leaves the line and is never sent; one sent is ended upstream. A turn goes back exactly
 * once, however the request ends.
 */
class Exchange implements Waiter {
  /** The function gave up, or its answer is complete: the connection to the proxy closed. */
  gone = false;
  /** Its site's turns, once its target is checked, and whether it holds one of them. */
  turns: Turns | undefined;
  holds = false;
  upstream: http.ClientRequest | undefined;
  /** Set while it waits in line: ends the wait. */
  #wake: (() => void) | undefined;

  constructor(
    readonly grant: EgressGrant,
    readonly res: http.ServerResponse,
  ) {}

  /** Waits for a turn: over when one is handed to it (`holds`) or when the function gives up. */
  waitForTurn(turns: Turns): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#wake = resolve;
      turns.wait(this);
    });
  }

  handed(): void {
    this.holds = true;
    this.#woken();
  }

  /** The connection to the proxy closed: a request in line leaves it. */
  close(): void {
    this.gone = true;
    if (this.#wake === undefined) return;
    this.turns?.leave(this);
    this.#woken();
  }

  #woken(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

export class EgressProxy {
  readonly #server: http.Server;
  readonly #grants = new Map<string, EgressGrant>();
  readonly #turns = new Map<string, Turns>();
  // A site pushed out closes its idle connections; those in use finish their requests, then close
  // within the idle timeout of the agent left behind.
  readonly #agents = new LRUCache<string, SiteAgents>({
    max: KEPT_SITES,
    dispose: (agents) => [agents.http, agents.https].forEach(closeKept),
  });
  readonly #resolve: (name: string) => Promise<string[]>;
  #url = '';

  private constructor(readonly options: EgressOptions) {
    this.#resolve = resolver(options.dnsServers);
    this.#server = http.createServer((req, res) => void this.#forward(req, res));
    this.#server.keepAliveTimeout = 60_000;
  }

  /** Listens on a free loopback port. */
  static async start(options: EgressOptions): Promise<EgressProxy> {
    const proxy = new EgressProxy(options);
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject);
      proxy.#server.listen(0, '127.0.0.1', () => resolve());
    });
    proxy.#url = `http://127.0.0.1:${(proxy.#server.address() as AddressInfo).port}`;
    return proxy;
  }

  /** Where workers reach the proxy: the only address their --allow-net names. */
  get url(): string {
    return this.#url;
  }

  get address(): string {
    return this.#url.slice('http://'.length);
  }

  /** A token for one worker's requests, made on behalf of its site and function. */
  grant(grant: EgressGrant): string {
    const token = crypto.randomBytes(24).toString('base64url');
    this.#grants.set(token, grant);
    return token;
  }

  revoke(token: string): void {
    this.#grants.delete(token);
  }

  async close(): Promise<void> {
    this.#agents.clear();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const grant = this.#grants.get(String(req.headers[EGRESS_TOKEN_HEADER] ?? ''));
    if (!grant)
      return answer(
        res,
        403,
        EGRESS_REFUSED_HEADER,
        'EGRESS_NOT_GRANTED',
        'this connection holds no grant of the egress proxy',
      );

    let target: URL;
    try {
      target = new URL(String(req.headers[EGRESS_URL_HEADER] ?? ''));
    } catch {
      return this.#refuse(grant, res, 'EGRESS_INVALID_URL', 'the target is not a URL');
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:')
      return this.#refuse(
        grant,
        res,
        'EGRESS_INVALID_URL',
        `${target.protocol} URLs are not fetched through the network`,
      );
    if (target.username || target.password)
      return this.#refuse(
        grant,
        res,
        'EGRESS_INVALID_URL',
        'credentials in the URL are not sent; use an Authorization header',
      );

    // From here on, the function's connection closing is heard: while the name resolves and while it
    // waits for its turn as well, when nothing else listens for it.
    const exchange = new Exchange(grant, res);
    res.once('close', () => this.#closed(exchange));

    let addresses: string[];
    const literal = literalAddress(target.hostname);
    try {
      addresses = literal ? [literal] : await this.#resolve(target.hostname);
    } catch {
      return this.#fail(grant, res, `${target.hostname} does not resolve`);
    }
    const refused = addresses.map(refusal).find((reason) => reason !== null);
    if (refused) return this.#refuse(grant, res, 'EGRESS_REFUSED', `${target.host}: ${refused}`);

    const turns = this.#turnsOf(grant.siteId);
    exchange.turns = turns;
    exchange.holds = !exchange.gone && turns.take();
    if (!exchange.holds && !exchange.gone) await exchange.waitForTurn(turns);
    // Gone while it waited, or just as its turn came: nothing is sent.
    if (exchange.gone) {
      this.options.observer.request(grant.siteId, 'abandoned');
      return this.#release(exchange);
    }

    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (!HOP_BY_HOP.has(name) && !name.startsWith('x-berth-egress-') && value !== undefined) headers[name] = value;
    }
    headers.host = target.host;
    const secure = target.protocol === 'https:';
    const agents = this.#agentsOf(grant.siteId);
    const upstream = (secure ? https : http).request({
      method: req.method,
      hostname: literal ?? target.hostname,
      port: target.port || (secure ? 443 : 80),
      path: `${target.pathname}${target.search}`,
      headers,
      lookup: pinnedTo(addresses[0]!),
      ...(secure && !literal ? { servername: target.hostname } : {}),
      timeout: this.options.connectTimeoutMs,
      agent: secure ? agents.https : agents.http,
    });
    exchange.upstream = upstream;
    upstream.once('socket', (socket) => {
      if (!socket.connecting) return socket.setTimeout(this.options.idleTimeoutMs);
      socket.setTimeout(this.options.connectTimeoutMs);
      socket.once('connect', () => socket.setTimeout(this.options.idleTimeoutMs));
    });
    upstream.once('timeout', () => upstream.destroy(new Error(`${target.host} did not answer in time`)));
    upstream.once('error', (err) => {
      this.#release(exchange);
      this.#fail(grant, res, `${target.host}: ${err.message}`);
    });
    upstream.once('response', (back) => this.#answer(exchange, back));
    // A request with neither header has no body (RFC 9112, 6.3): it goes at once, with nothing to pipe.
    if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) upstream.end();
    else {
      req.on('data', (chunk: Buffer) => this.options.observer.bytes(grant.siteId, 'out', chunk.length));
      req.pipe(upstream);
    }
  }

  /** The server's answer, streamed back to the function without the headers of its connection. */
  #answer(exchange: Exchange, back: http.IncomingMessage): void {
    const { grant, res } = exchange;
    const { observer } = this.options;
    observer.request(grant.siteId, 'forwarded');
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(back.headers))
      if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
    res.writeHead(back.statusCode ?? 502, back.statusMessage, headers);
    back.on('data', (chunk: Buffer) => observer.bytes(grant.siteId, 'in', chunk.length));
    back.pipe(res);
    back.once('error', () => res.destroy());
  }

  /** The function's connection closed: its answer is complete, or the function gave up. */
  #closed(exchange: Exchange): void {
    exchange.close();
    this.#release(exchange);
    // Given up before the whole answer reached it: the request upstream goes too.
    if (exchange.upstream && !exchange.res.writableFinished) exchange.upstream.destroy();
  }

  /** Gives the request's turn back, if it holds one; a site with nothing in flight or waiting is forgotten. */
  #release(exchange: Exchange): void {
    const { turns } = exchange;
    if (!turns) return;
    if (exchange.holds) {
      exchange.holds = false;
      turns.give();
    }
    const { siteId } = exchange.grant;
    if (turns.idle && this.#turns.get(siteId) === turns) this.#turns.delete(siteId);
  }

  #refuse(grant: EgressGrant, res: http.ServerResponse, code: string, message: string): void {
    this.options.observer.request(grant.siteId, 'refused');
    this.options.observer.log(grant, `fetch refused: ${message}`);
    answer(res, 403, EGRESS_REFUSED_HEADER, code, message);
  }

  #fail(grant: EgressGrant, res: http.ServerResponse, message: string): void {
    this.options.observer.request(grant.siteId, 'failed');
    this.options.observer.log(grant, `fetch failed: ${message}`);
    if (!res.headersSent) answer(res, 502, EGRESS_FAILED_HEADER, 'EGRESS_FAILED', message);
    else res.destroy();
  }

  #agentsOf(siteId: string): SiteAgents {
    let agents = this.#agents.get(siteId);
    if (!agents) {
      const options = { keepAlive: true, maxFreeSockets: this.options.perSite, timeout: KEPT_CONNECTION_MS };
      agents = { http: new SiteHttpAgent(options), https: new SiteHttpsAgent(options) };
      this.#agents.set(siteId, agents);
    }
    return agents;
  }

  #turnsOf(siteId: string): Turns {
    let turns = this.#turns.get(siteId);
    if (!turns) {
      turns = new Turns(this.options.perSite);
      this.#turns.set(siteId, turns);
    }
    return turns;
  }
}

/** The proxy's own answer: a code in a header the shim reads, and the reason as the body. */
function answer(res: http.ServerResponse, status: number, header: string, code: string, message: string): void {
  res.writeHead(status, { [header]: code, 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
  res.end(message);
}
