// The metrics' part of a start: what /metrics reports (the other parts add their readings as they
// open), and, with BERTH_METRICS_ADDRESS, a listener of its own for it, meant for a private address.
import { metricsServer } from '../http/metrics-endpoint.ts';
import { Metrics } from '../metrics.ts';
import { listenAddress, opened, type Part } from '../part.ts';
import { storageByAccount } from '../services/storage-quota.ts';

export const metricsPart: Part = {
  name: 'the metrics',
  open(deps, { config }) {
    const { metadata, blobs } = opened(deps, 'the metrics', 'metadata', 'blobs');
    const { db } = metadata;
    const metrics = new Metrics({
      db,
      storageByAccount: () => storageByAccount({ db }, config),
      metadataQueries: () => metadata.queries(),
      objectStoreRequests: () => blobs.requests,
    });
    return { metrics };
  },
  serves(deps) {
    if (!deps.config.metricsAddress) return [];
    return [
      {
        server: metricsServer(deps.metrics),
        ...listenAddress(deps.config.metricsAddress),
        path: '/metrics',
        kind: 'private',
      },
    ];
  },
};
