// `GET /v0/sites/:siteId/logs/stream`: a site's function log lines as server-sent events, read from
// function_logs (where every node stores its lines) whenever the change feed says lines of the site
// were stored, and every few seconds in case a notification was lost. Each line is `event: log` with
// its id, so a client that reconnects with Last-Event-ID misses none still stored. The stream's key or
// session is checked again every BERTH_LOG_STREAM_RECHECK_MS (30 s), and at once when the change feed
// says a credential was revoked: a revoked one ends the stream.
import type Koa from 'koa';
import { BerthError } from '../errors.ts';
import { authenticateRequest } from './middleware/auth.ts';
import type { Actor, Deps } from '../deps.ts';
import { type FunctionLogLine, type LogFilter, linesAfter, newestLineId } from '../logs/function-logs.ts';
import { requireSite } from '../services/site-rows.ts';

/** How often a stream looks without being told: a lost notification costs at most this. */
const POLL_MS = 5000;
/** A comment this often keeps proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;
/** Lines read at a time. */
const BATCH = 200;

/** Where the stream starts: after the client's last event, or `since`, or after the newest line. */
function startAfter(ctx: Koa.Context, since: number | undefined): number | undefined {
  const last = ctx.get('Last-Event-ID');
  if (last === '') return since;
  if (!/^\d{1,15}$/.test(last)) throw new BerthError('invalid_request', 'Last-Event-ID: must be a line id');
  return Number(last);
}

/** Whether the request's key or session still reads this site of the account it was opened for. */
async function stillAllowed(deps: Deps, ctx: Koa.Context, actor: Actor, siteId: string): Promise<boolean> {
  try {
    const again = await authenticateRequest(ctx, deps);
    if (again.accountId !== actor.accountId) return false;
    await requireSite(deps, again, siteId);
    return true;
  } catch (err) {
    if (err instanceof BerthError) return false;
    throw err;
  }
}

const event = (line: FunctionLogLine) => `event: log\nid: ${line.id}\ndata: ${JSON.stringify(line)}\n\n`;

export async function streamLogs(
  deps: Deps,
  actor: Actor,
  ctx: Koa.Context,
  siteId: string,
  query: LogFilter & { since?: number | undefined },
): Promise<void> {
  await requireSite(deps, actor, siteId);
  const { since, ...filter } = query;
  let after = startAfter(ctx, since) ?? (await newestLineId(deps, siteId));
  const stream = deps.logStreams.open(actor.accountId, siteId);
  const res = ctx.res;
  const gone = () => stream.end();
  res.once('close', gone);
  ctx.respond = false;
  ctx.status = 200;
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    // nginx and its kind pass each event on instead of buffering the response.
    'X-Accel-Buffering': 'no',
  });
  let lastWrite = Date.now();
  const recheckMs = deps.config.logStreamRecheckMs;
  let checked = Date.now();
  const write = async (text: string) => {
    lastWrite = Date.now();
    if (!res.write(text))
      await new Promise<void>((resolve) => {
        res.once('drain', resolve);
        res.once('close', resolve);
      });
  };
  try {
    await write('retry: 1000\n\n');
    while (!stream.ended) {
      if (stream.takeRecheck() || Date.now() - checked >= recheckMs) {
        if (!(await stillAllowed(deps, ctx, actor, siteId))) break;
        checked = Date.now();
      }
      const lines = await linesAfter(deps, siteId, after, filter, BATCH);
      for (const line of lines) {
        if (stream.ended) break;
        await write(event(line));
        after = line.id;
      }
      if (lines.length === BATCH) continue;
      if (Date.now() - lastWrite >= HEARTBEAT_MS) await write(': keep-alive\n\n');
      const now = Date.now();
      await stream.wait(Math.max(0, Math.min(POLL_MS, HEARTBEAT_MS - (now - lastWrite), recheckMs - (now - checked))));
    }
  } catch (err) {
    // The metadata failed mid-stream: the client reconnects with the last id it has.
    deps.log.warn({ err, siteId }, 'a live log stream ended on a failure');
  } finally {
    stream.end();
    res.off('close', gone);
    res.end();
  }
}
