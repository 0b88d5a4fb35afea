// The runtime's part of a start: the egress proxy functions reach the network through, and the runtime
// host that runs them in Deno workers, each counted in the metrics and the analytics; once every part
// is open, the hooks that serve the workers' ctx calls, their lines to site databases and their log
// lines, and the change-feed listeners that retire workers of a changed function and close the lines
// of a database that moves. Its code lives in runtime-host/, which knows nothing of the control plane.
import { EgressProxy } from '../../runtime-host/egress-proxy.ts';
import { RuntimeHost } from '../../runtime-host/runtime.ts';
import { opened, type Part } from '../part.ts';
import { closingDbLines, createCtxHandler, createDbLineHandler } from '../services/function-context.ts';
import { retiringFunctions } from '../services/functions.ts';

export const runtimePart: Part = {
  name: 'the runtime',
  async open(deps, { config, log, stack, denoPath, workerNice }) {
    const { metrics, functionLogs, analytics, runtimeDir } = opened(
      deps,
      'the runtime',
      'metrics',
      'functionLogs',
      'analytics',
      'runtimeDir',
    );
    const egress = await EgressProxy.start({
      perSite: config.egressConnectionsPerSite,
      dnsServers: config.egressDnsServers,
      connectTimeoutMs: 10_000,
      idleTimeoutMs: config.functionTimeoutMs,
      observer: {
        request: (siteId, outcome) => metrics.egressRequest(siteId, outcome),
        bytes: (siteId, direction, bytes) => metrics.egressBytes(siteId, direction, bytes),
        log: (grant, message) =>
          functionLogs.add(grant.siteId, grant.path, { requestId: null, level: 'warn', message }),
      },
    });
    stack.defer('the egress proxy', () => egress.close());
    const runtime = new RuntimeHost({
      denoPath,
      runtimeDir,
      heapMb: config.functionHeapMb,
      // Deno itself and ArrayBuffers live outside the V8 heap cap; allow them a fixed margin.
      rssLimitBytes: (config.functionHeapMb + 192) * 1024 * 1024,
      timeoutMs: config.functionTimeoutMs,
      idleMs: config.functionIdleMs,
      maxWorkers: config.maxWorkers,
      memoryBudgetBytes: config.workerMemoryBytes,
      spareWorkers: config.spareWorkers,
      startupTimeoutMs: 10_000,
      logger: log,
      egress,
      ...(workerNice !== undefined ? { workerNice } : {}),
      observer: {
        started: (seconds, version) => {
          metrics.workerStarted(seconds);
          analytics.coldStart(version.siteId);
        },
        exited: (reason) => metrics.workerExited(reason),
      },
    });
    stack.defer('the runtime', () => runtime.close());
    metrics.read({ liveWorkers: () => runtime.workerCount });
    return { runtime };
  },
  listens: (deps) => [retiringFunctions(deps.runtime, deps.runtimeDir), closingDbLines(deps)],
  start(deps) {
    deps.runtime.serve({
      ctx: createCtxHandler(deps),
      dbLine: createDbLineHandler(deps),
      log: (version, entry) => deps.functionLogs.add(version.siteId, version.path, entry),
    });
  },
};
