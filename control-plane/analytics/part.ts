// The analytics' part of a start: a node's collector of its sites' traffic (collector.ts), written to
// the metadata in batches and folded as it ages (store.ts), or nothing counted when BERTH_ANALYTICS is
// off; its close writes what it still holds.
import { opened, type Part } from '../part.ts';
import { AnalyticsCollector, COUNTING_NOTHING, type TrafficCounter } from './collector.ts';
import { foldingEveryMinute, writeTallies } from './store.ts';

declare module '../deps.ts' {
  interface Deps {
    /** Where sites' traffic is counted for their analytics. */
    analytics: TrafficCounter;
  }
}

export const analyticsPart: Part = {
  name: 'the analytics',
  open(deps, { config, log, stack, testClock }) {
    const { db, now } = opened(deps, 'the analytics', 'db', 'now');
    const analytics = config.analytics
      ? new AnalyticsCollector({
          // Counting reads the clock on every request: the monotonic clock steps a millisecond ahead
          // on each call within a millisecond, and would run ahead of the real one on a busy node.
          clock: testClock ? () => now().getTime() : Date.now,
          flushMs: config.analyticsFlushMs,
          write: (tallies) => writeTallies(db, tallies),
          afterWrite: foldingEveryMinute(db, now),
          log,
        })
      : COUNTING_NOTHING;
    stack.defer('the analytics', () => analytics.close());
    return { analytics };
  },
};
