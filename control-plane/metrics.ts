// Prometheus metrics of one server (prom-client), in a registry of its own: what operators watch —
// requests by route and status with their latency, workers live and started, cold starts, worker
// exits by reason, ctx calls by method, cron runs by outcome, site database statement latency, bytes
// stored, each account's stored bytes against its limit, and what the node asks of the services it
// shares with other nodes (metadata queries, object-store requests, database calls to other nodes), and
// certificates (orders by outcome, handshakes refused, renewals failing). Services and the runtime report through the small observer functions below, so
// nothing outside this file knows prom-client.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Db } from './db/metadata.ts';

/** Latency buckets (seconds) from a warm static file to a slow function. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface MetricsSources {
  db: Db;
  /** What each account stores and may store (null: no limit), read at scrape time. */
  storageByAccount: () => Promise<Array<{ accountId: string; usedBytes: number; limitBytes: number | null }>>;
  /** Running totals kept by the parts that talk to each shared service, read at scrape time. */
  metadataQueries: () => number;
  objectStoreRequests: () => number;
}

/** Readings of the parts made after the metrics (they report to it), given once they exist: 0 until then. */
export interface LaterReadings {
  /** Live function workers. */
  liveWorkers: () => number;
  /** Site database calls sent to other nodes (peer calls). */
  peerCalls: () => number;
  /** Site databases of lost nodes this node took over (cluster/failover.ts). */
  databasesTakenOver: () => number;
  /** The replication of the site databases this node follows. */
  replication: () => ReplicationReading;
}

export interface ReplicationReading {
  databases: Array<{ siteId: string; lagMs: number; replicatedAt: Date | null; replicaBytes: number | null }>;
  restarts: number;
  errors: number;
}

/** A counter whose total another part keeps: set from it at each scrape. */
function mirrored(name: string, help: string, registers: Registry[], total: () => number): void {
  new Counter({
    name,
    help,
    registers,
    collect() {
      this.reset();
      this.inc(total());
    },
  });
}

export class Metrics {
  readonly registry = new Registry();
  readonly #later: LaterReadings = {
    liveWorkers: () => 0,
    peerCalls: () => 0,
    databasesTakenOver: () => 0,
    replication: () => ({ databases: [], restarts: 0, errors: 0 }),
  };
  readonly #requests: Counter<'kind' | 'route' | 'status'>;
  readonly #requestSeconds: Histogram<'kind' | 'route'>;
  readonly #workersStarted: Counter;
  readonly #coldStartSeconds: Histogram;
  readonly #workerExits: Counter<'reason'>;
  readonly #ctxCalls: Counter<'method'>;
  readonly #cronRuns: Counter<'outcome'>;
  readonly #statementSeconds: Histogram<'source' | 'outcome'>;
  readonly #egressRequests: Counter<'site' | 'outcome'>;
  readonly #egressBytes: Counter<'site' | 'direction'>;
  readonly #tlsOrders: Counter<'outcome'>;
  readonly #tlsRefused: Counter<'reason'>;

  /** Gives the readings of a part made after the metrics, taken at each scrape from then on. */
  read(readings: Partial<LaterReadings>): void {
    Object.assign(this.#later, readings);
  }

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    const later = this.#later;
    collectDefaultMetrics({ register: this.registry, prefix: 'berth_' });
    this.#requests = new Counter({
      name: 'berth_http_requests_total',
      help: 'HTTP requests answered, by kind (api, site), route and status',
      labelNames: ['kind', 'route', 'status'],
      registers,
    });
    this.#requestSeconds = new Histogram({
      name: 'berth_http_request_duration_seconds',
      help: 'Time to answer an HTTP request (its head, for streamed bodies)',
      labelNames: ['kind', 'route'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    new Gauge({
      name: 'berth_workers_live',
      help: 'Function workers alive now',
      registers,
      collect() {
        this.set(later.liveWorkers());
      },
    });
    this.#workersStarted = new Counter({
      name: 'berth_workers_started_total',
      help: 'Function workers started',
      registers,
    });
    this.#coldStartSeconds = new Histogram({
      name: 'berth_cold_start_duration_seconds',
      help: 'Time from starting a function worker to its being ready (a cold start)',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.#workerExits = new Counter({
      name: 'berth_worker_exits_total',
      help: 'Function workers that stopped, by reason: disposed (idle or retired), timeout, memory, crashed, protocol',
      labelNames: ['reason'],
      registers,
    });
    this.#ctxCalls = new Counter({
      name: 'berth_ctx_calls_total',
      help: 'ctx calls served to functions, by method',
      labelNames: ['method'],
      registers,
    });
    this.#cronRuns = new Counter({
      name: 'berth_cron_runs_total',
      help: 'Cron runs that ended, by outcome',
      labelNames: ['outcome'],
      registers,
    });
    this.#statementSeconds = new Histogram({
      name: 'berth_database_statement_duration_seconds',
      help: 'Site database statements, by source (api, function, system) and outcome (ok, error)',
      labelNames: ['source', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.#egressRequests = new Counter({
      name: 'berth_egress_requests_total',
      help: 'Outbound requests of functions through the egress proxy, by site and outcome (forwarded, refused, failed, abandoned while waiting for a turn)',
      labelNames: ['site', 'outcome'],
      registers,
    });
    this.#egressBytes = new Counter({
      name: 'berth_egress_bytes_total',
      help: 'Bytes of functions’ outbound requests (out) and their answers (in), by site',
      labelNames: ['site', 'direction'],
      registers,
    });
    this.#tlsOrders = new Counter({
      name: 'berth_tls_orders_total',
      help: 'Certificate orders to the ACME CA (BERTH_TLS=acme), by outcome (issued, failed)',
      labelNames: ['outcome'],
      registers,
    });
    this.#tlsRefused = new Counter({
      name: 'berth_tls_handshakes_refused_total',
      help: 'TLS handshakes given no certificate, by reason: unknown (a name Berth does not serve), no_certificate (served, but its order failed, backs off or waits on another node)',
      labelNames: ['reason'],
      registers,
    });
    new Gauge({
      name: 'berth_tls_renewals_failing',
      help: 'Certificates whose last renewal failed: the old one serves until it ends (/readyz names them)',
      registers,
      async collect() {
        const row = (await sources
          .db('tls_orders')
          .join('tls_certificates', 'tls_certificates.hostname', 'tls_orders.hostname')
          .where('tls_orders.failures', '>', 0)
          .count({ n: '*' })
          .first()) as { n: number | string } | undefined;
        this.set(Number(row?.n ?? 0));
      },
    });
    mirrored(
      'berth_metadata_queries_total',
      'Statements sent to the metadata database (transaction statements included)',
      registers,
      sources.metadataQueries,
    );
    mirrored(
      'berth_object_store_requests_total',
      'Requests sent to the object store (0 on the blob directory)',
      registers,
      sources.objectStoreRequests,
    );
    mirrored('berth_channel_calls_total', 'Site database calls sent to other nodes (peer calls)', registers, () =>
      later.peerCalls(),
    );
    mirrored(
      'berth_databases_taken_over_total',
      'Site databases of lost nodes this node took over from their replicas',
      registers,
      () => later.databasesTakenOver(),
    );
    mirrored(
      'berth_database_replicator_restarts_total',
      'Starts of the replication engine (it restarts when the set of databases in use changes)',
      registers,
      () => later.replication().restarts,
    );
    mirrored(
      'berth_database_replicator_errors_total',
      'Errors the replication engine reported',
      registers,
      () => later.replication().errors,
    );
    new Gauge({
      name: 'berth_database_replication_lag_seconds',
      help: 'How long the oldest write not yet known to be in the replica has waited, per site database in use',
      labelNames: ['site'],
      registers,
      collect() {
        this.reset();
        for (const db of later.replication().databases) this.set({ site: db.siteId }, db.lagMs / 1000);
      },
    });
    new Gauge({
      name: 'berth_database_replicated_timestamp_seconds',
      help: 'When the replica last received writes of the site database (Unix time), per site database in use',
      labelNames: ['site'],
      registers,
      collect() {
        this.reset();
        for (const db of later.replication().databases)
          if (db.replicatedAt) this.set({ site: db.siteId }, db.replicatedAt.getTime() / 1000);
      },
    });
    new Gauge({
      name: 'berth_database_replica_bytes',
      help: 'Bytes the replica of the site database takes (measured every few minutes), per site database in use',
      labelNames: ['site'],
      registers,
      collect() {
        this.reset();
        for (const db of later.replication().databases)
          if (db.replicaBytes !== null) this.set({ site: db.siteId }, db.replicaBytes);
      },
    });
    new Gauge({
      name: 'berth_bytes_stored',
      help: 'Bytes of file content stored (each distinct blob once)',
      registers,
      async collect() {
        const blobs = sources.db('file_versions').max({ bytes: 'bytes' }).groupBy('blob_sha256').as('blobs');
        const row = (await sources.db.sum({ bytes: 'bytes' }).from(blobs).first()) as
          | { bytes: number | string | null }
          | undefined;
        this.set(Number(row?.bytes ?? 0));
      },
    });
    new Gauge({
      name: 'berth_account_storage_bytes',
      help: 'Bytes each account’s file versions hold, each distinct content once',
      labelNames: ['account'],
      registers,
      async collect() {
        this.reset();
        for (const { accountId, usedBytes } of await sources.storageByAccount())
          this.set({ account: accountId }, usedBytes);
      },
    });
    new Gauge({
      name: 'berth_account_storage_limit_bytes',
      help: 'The storage limit of each account that has one',
      labelNames: ['account'],
      registers,
      async collect() {
        this.reset();
        for (const { accountId, limitBytes } of await sources.storageByAccount())
          if (limitBytes !== null) this.set({ account: accountId }, limitBytes);
      },
    });
  }

  request(kind: 'api' | 'site', route: string, status: number, seconds: number): void {
    this.#requests.inc({ kind, route, status: String(status) });
    this.#requestSeconds.observe({ kind, route }, seconds);
  }

  workerStarted(seconds: number): void {
    this.#workersStarted.inc();
    this.#coldStartSeconds.observe(seconds);
  }

  workerExited(reason: string): void {
    this.#workerExits.inc({ reason });
  }

  egressRequest(site: string, outcome: string): void {
    this.#egressRequests.inc({ site, outcome });
  }

  egressBytes(site: string, direction: string, bytes: number): void {
    this.#egressBytes.inc({ site, direction }, bytes);
  }

  ctxCall(method: string): void {
    this.#ctxCalls.inc({ method });
  }

  cronRun(outcome: string): void {
    this.#cronRuns.inc({ outcome });
  }

  tlsOrder(outcome: 'issued' | 'failed'): void {
    this.#tlsOrders.inc({ outcome });
  }

  tlsRefused(reason: 'unknown' | 'no_certificate'): void {
    this.#tlsRefused.inc({ reason });
  }

  statement(source: string, ok: boolean, seconds: number): void {
    this.#statementSeconds.observe({ source, outcome: ok ? 'ok' : 'error' }, seconds);
  }
}
