// /metrics in Prometheus's text format: on the main port behind BERTH_METRICS_TOKEN (api-app.ts), or on
// a listener of its own at BERTH_METRICS_ADDRESS, meant for a private address, with no token.
import http from 'node:http';
import type Koa from 'koa';
import type { Metrics } from '../metrics.ts';

export async function sendMetrics(ctx: Koa.Context, metrics: Metrics): Promise<void> {
  const text = await metrics.registry.metrics();
  ctx.set('Cache-Control', 'no-store');
  ctx.type = metrics.registry.contentType;
  ctx.body = text;
}

/** A listener that answers GET /metrics and nothing else. */
export function metricsServer(metrics: Metrics): http.Server {
  return http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?', 1)[0] !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('only /metrics is served here\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) =>
        res.writeHead(200, { 'Content-Type': metrics.registry.contentType, 'Cache-Control': 'no-store' }).end(text),
      () => res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end('metrics could not be collected\n'),
    );
  });
}
