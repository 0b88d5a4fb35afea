// What a start opened is released in the reverse order, every part even when one close fails.
import test from 'ava';
import { CloseStack } from '../control-plane/close-stack.ts';

test('parts close last-opened first, awaiting each', async (t) => {
  const stack = new CloseStack();
  const closed: string[] = [];
  for (const name of ['lock', 'metadata', 'runtime']) {
    stack.defer(name, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      closed.push(name);
    });
  }
  await stack.close();
  t.deepEqual(closed, ['runtime', 'metadata', 'lock']);
});

test('a close that throws does not keep the others from closing, and is reported with its part', async (t) => {
  const stack = new CloseStack();
  const closed: string[] = [];
  stack.defer('lock', () => closed.push('lock'));
  stack.defer('metadata', () => {
    throw new Error('connection lost');
  });
  stack.defer('runtime', () => closed.push('runtime'));
  const err = await t.throwsAsync(() => stack.close());
  t.is(err?.message, 'closing metadata failed');
  t.is((err?.cause as Error | undefined)?.message, 'connection lost');
  t.deepEqual(closed, ['runtime', 'lock']);
});

test('several failed closes are reported together; a second close has nothing left to do', async (t) => {
  const stack = new CloseStack();
  stack.defer('a', () => Promise.reject(new Error('a broke')));
  stack.defer('b', () => Promise.reject(new Error('b broke')));
  const err = await t.throwsAsync<AggregateError>(() => stack.close());
  t.true(err instanceof AggregateError);
  t.deepEqual(
    err?.errors.map((e: Error) => e.message),
    ['closing b failed', 'closing a failed'],
  );
  await t.notThrowsAsync(() => stack.close());
  t.throws(() => stack.defer('late', () => {}), { message: 'late was opened after the start was released' });
});
