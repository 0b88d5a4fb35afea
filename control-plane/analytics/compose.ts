// The analytics part of a start: a node's collector of its sites' traffic (collector.ts), written to
// the metadata in batches and folded as it ages (store.ts), or nothing counted when BERTH_ANALYTICS is
// off; its close, which writes what it still holds, on the start's CloseStack.
import type { Knex } from 'knex';
import type { CloseStack } from '../close-stack.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { AnalyticsCollector, COUNTING_NOTHING, type TrafficCounter } from './collector.ts';
import { foldingEveryMinute, writeTallies } from './store.ts';

export function composeAnalytics(
  config: Config,
  parts: { db: Knex; now: () => Date; testClock: boolean; log: Logger },
  stack: CloseStack,
): TrafficCounter {
  const { db, now, log } = parts;
  const analytics = config.analytics
    ? new AnalyticsCollector({
        // Counting reads the clock on every request: the monotonic clock steps a millisecond ahead
        // on each call within a millisecond, and would run ahead of the real one on a busy node.
        clock: parts.testClock ? () => now().getTime() : Date.now,
        flushMs: config.analyticsFlushMs,
        write: (tallies) => writeTallies(db, tallies),
        afterWrite: foldingEveryMinute(db, now),
        log,
      })
    : COUNTING_NOTHING;
  stack.defer('the analytics', () => analytics.close());
  return analytics;
}
