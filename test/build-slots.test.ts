// A node's build slots: no more builds at once than slots; the accounts waiting take turns, each
// account's builds in the order they came.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { BuildSlots } from '../control-plane/builds/build-slots.ts';

test('builds past the slots wait, and start in the order they came; a failed build frees its slot', async (t) => {
  const slots = new BuildSlots(2);
  let running = 0;
  let most = 0;
  const started: number[] = [];
  const build = (n: number) =>
    slots.run('account', async () => {
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
  t.is(await slots.run('account', async () => 'after'), 'after', 'every slot is free again');
});

test('an account’s burst of builds does not hold back another account’s: the accounts waiting take turns', async (t) => {
  const slots = new BuildSlots(1);
  const started: string[] = [];
  const build = (name: string) =>
    slots.run(name[0]!, async () => {
      started.push(name);
      await sleep(10);
    });
  // a1 takes the slot; a2…a5 wait, then b1 and c1 come.
  const burst = ['a1', 'a2', 'a3', 'a4', 'a5'].map(build);
  const others = ['b1', 'c1', 'b2'].map(build);
  await Promise.all([...burst, ...others]);
  t.deepEqual(started, ['a1', 'a2', 'b1', 'c1', 'a3', 'b2', 'a4', 'a5']);
});
