// Whether this server can do its work now, for GET /readyz: the metadata database answers, the blob
// store takes a write (the blob directory) or answers for its bucket (the object store), and the Deno
// executable that runs functions and site databases is there; with its view of the instance's nodes and,
// with BERTH_TLS=acme, the certificates whose renewal failed (still serving: not a reason to be unready). Each
// check has a deadline, so a stuck disk makes the answer "not ready" rather than no answer. Stalled database
// replication is reported too, without making the node unready.
import type { Deps } from './deps.ts';
import { isMetadataUnavailable } from './db/errors.ts';
import { StorageUnavailableError } from '../storage/blob-driver.ts';
import { listNodes, type NodeState } from './cluster/nodes.ts';
import { type FailingRenewal, failingRenewals } from './tls/order-leases.ts';

const CHECK_MS = 2000;

export type CheckResult = 'ok' | string;

/** The metadata answers a query; an outage is named without the server's address (this endpoint is public). */
async function metadataAnswers(db: Deps['db']): Promise<void> {
  try {
    await db.raw('SELECT 1');
  } catch (err) {
    if (!isMetadataUnavailable(err)) throw err;
    const code = (err as { code?: unknown }).code;
    throw new Error(`the metadata database is not answering${typeof code === 'string' ? ` (${code})` : ''}`);
  }
}

/** The blob store answers; an object store's outage is named without its endpoint or bucket. */
async function blobsAnswer(blobs: Deps['blobs']): Promise<void> {
  try {
    await blobs.writable();
  } catch (err) {
    if (err instanceof StorageUnavailableError) throw new Error(`the blob store is not answering (${err.reason})`);
    throw err;
  }
}

async function check(run: () => Promise<unknown>): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      run(),
      new Promise(
        (_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_MS} ms`)), CHECK_MS)),
      ),
    ]);
    return 'ok';
  } catch (err) {
    // A short reason for the operator; no paths or internals beyond the error's own message.
    return err instanceof Error ? err.message.split('\n')[0]!.slice(0, 200) : 'failed';
  } finally {
    clearTimeout(timer);
  }
}

/** The node's view of its instance: how many nodes are in each state, and how many can hold databases. */
export interface ClusterView {
  roles: string[];
  nodes: Record<NodeState, number>;
  databaseNodesUp: number;
}

async function clusterView(deps: Pick<Deps, 'db' | 'config'>): Promise<ClusterView | null> {
  try {
    const nodes = await listNodes(deps.db);
    const count = (state: NodeState) => nodes.filter((node) => node.state === state).length;
    return {
      roles: deps.config.roles,
      nodes: { up: count('up'), down: count('down'), stopped: count('stopped') },
      databaseNodesUp: nodes.filter((node) => node.state === 'up' && node.roles.includes('database')).length,
    };
  } catch {
    return null; // The metadata check says why.
  }
}

/** Certificates by Berth itself: the ones whose last renewal failed, each still serving until `notAfter`. */
export interface TlsView {
  renewalsFailing: FailingRenewal[];
}

async function tlsView(deps: Pick<Deps, 'db' | 'config'>): Promise<TlsView | null> {
  try {
    return { renewalsFailing: await failingRenewals(deps) };
  } catch {
    return null; // The metadata check says why.
  }
}

/** `view`, or null when it has not answered within the checks' deadline. */
const inTime = <T>(view: Promise<T | null>) =>
  Promise.race([view, new Promise<null>((resolve) => setTimeout(resolve, CHECK_MS, null).unref())]);

export async function readiness(
  deps: Pick<Deps, 'db' | 'blobs' | 'runtime' | 'config' | 'replicationStalled'>,
): Promise<{
  ready: boolean;
  checks: Record<'metadata' | 'blobs' | 'deno', CheckResult>;
  cluster: ClusterView | null;
  tls?: TlsView | null;
  replication?: CheckResult;
}> {
  const [metadata, blobs, deno, cluster, tls] = await Promise.all([
    check(() => metadataAnswers(deps.db)),
    check(() => blobsAnswer(deps.blobs)),
    check(() => deps.runtime.denoAvailable()),
    inTime(clusterView(deps)),
    deps.config.tls ? inTime(tlsView(deps)) : undefined,
  ]);
  const checks: Record<'metadata' | 'blobs' | 'deno', CheckResult> & { web?: CheckResult } = { metadata, blobs, deno };
  // A node without the web role answers only the other nodes: a load balancer leaves it out.
  if (!deps.config.roles.includes('web')) checks.web = 'this node does not serve sites or the API (BERTH_ROLES)';
  // A node whose replication stalled still serves every call rightly: it is reported, not taken out of
  // the balancer (which would move nothing to a node whose replication works).
  const stalled = deps.config.databaseReplication ? deps.replicationStalled() : null;
  return {
    ready: Object.values(checks).every((result) => result === 'ok'),
    checks,
    cluster,
    ...(tls !== undefined ? { tls } : {}),
    ...(deps.config.databaseReplication ? { replication: stalled ?? 'ok' } : {}),
  };
}
