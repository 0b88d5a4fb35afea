// A node's build slots: no more builds at once than slots, the rest started in the order they came.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { BuildSlots } from '../control-plane/builds/build-slots.ts';

test('builds past the slots wait, and start in the order they came; a failed build frees its slot', async (t) => {
  const slots = new BuildSlots(2);
  let running = 0;
  let most = 0;
  const started: number[] = [];
  const build = (n: number) =>
    slots.run(async () => {
      started.push(n);
      most = Math.max(most, ++running);
      await sleep(20);
      running--;
      if (n === 1) throw new Error('the build failed');
      return n;
    });
  const results = await Promise.allSettled([1, 2, 3, 4, 5].map(build));
  t.is(most, 2);
  t.deepEqual(started, [1, 2, 3, 4, 5]);
  t.is(results[0]!.status, 'rejected');
  t.deepEqual(
    results.slice(1).map((r) => (r.status === 'fulfilled' ? r.value : null)),
    [2, 3, 4, 5],
  );
  t.is(await slots.run(async () => 'after'), 'after', 'every slot is free again');
});
