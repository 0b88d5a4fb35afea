// The certificate of each TLS handshake (the HTTPS listener's SNICallback): from memory, else from the
// metadata, else ordered now, for a name this instance serves (servesName) and no other. An unknown
// name costs a lookup in memory (or the hosting cache) and a counter: no order, no key, no log line.
// A certificate stored or renewed by any node reaches this one's memory through the change feed.
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import type { Change, ChangeListener } from '../db/changes.ts';
import type { Deps } from '../deps.ts';
import { servesName } from '../domains/served-names.ts';
import { hostName } from '../domains/site-names.ts';
import { readCertificate } from './certificate-store.ts';
import type { Orderer } from './orderer.ts';

/** How long a handshake waits for a certificate another node is ordering. */
const WAIT_FOR_OTHER_MS = 30_000;
const POLL_MS = 250;

interface Held {
  context: tls.SecureContext;
  notAfter: number;
}

export class Certificates implements ChangeListener {
  readonly #held = new Map<string, Held>();
  readonly #loading = new Map<string, Promise<Held | undefined>>();
  /** Bumped by every change, so a read that raced a renewal does not keep the older certificate. */
  #generation = 0;

  constructor(
    private readonly deps: Deps,
    private readonly orderer: Orderer,
  ) {}

  /** For https.createServer's SNICallback. */
  readonly sni = (servername: string, done: (err: Error | null, context?: tls.SecureContext) => void): void => {
    this.context(servername).then(
      (context) => done(null, context),
      (err: unknown) => {
        this.deps.log.warn({ err, hostname: servername }, 'could not find the certificate of a served name');
        done(err instanceof Error ? err : new Error(String(err)));
      },
    );
  };

  /** The name's certificate, as a context to handshake with; undefined: it has none (the handshake fails). */
  async context(servername: string): Promise<tls.SecureContext | undefined> {
    const name = hostName(servername);
    const held = this.#held.get(name);
    if (held && held.notAfter > this.deps.now().getTime()) return held.context;
    if (!(await servesName(this.deps, name))) {
      this.deps.metrics.tlsRefused('unknown');
      return undefined;
    }
    let loading = this.#loading.get(name);
    if (!loading) {
      loading = this.#load(name).finally(() => this.#loading.delete(name));
      this.#loading.set(name, loading);
    }
    const found = await loading;
    if (!found) this.deps.metrics.tlsRefused('no_certificate');
    return found?.context;
  }

  change(change: Change): void {
    if (change.kind !== 'certificate') return;
    this.#generation++;
    this.#held.delete(change.hostname);
  }

  resync(): void {
    this.#generation++;
    this.#held.clear();
  }

  async #load(name: string): Promise<Held | undefined> {
    const stored = await this.#stored(name);
    if (stored) return stored;
    const outcome = await this.orderer.obtain(name);
    if (outcome === 'issued') return this.#stored(name);
    if (outcome !== 'busy') return undefined;
    // Another node is ordering it: its certificate is in the metadata once it has one.
    const deadline = Date.now() + WAIT_FOR_OTHER_MS;
    while (Date.now() < deadline) {
      await sleep(POLL_MS);
      const ordered = await this.#stored(name);
      if (ordered) return ordered;
    }
    return undefined;
  }

  /** The stored certificate while it is valid, held in memory from now on. */
  async #stored(name: string): Promise<Held | undefined> {
    const generation = this.#generation;
    const stored = await readCertificate(this.deps, name);
    if (!stored || stored.notAfter.getTime() <= this.deps.now().getTime()) return undefined;
    const held = {
      context: tls.createSecureContext({ cert: stored.certificate, key: stored.key }),
      notAfter: stored.notAfter.getTime(),
    };
    if (generation === this.#generation) this.#held.set(name, held);
    return held;
  }
}
