// Cron jobs driven by an injected clock: deploy-time validation, runs at their UTC times, coalesced
// catch-up, no overlap, archived sites and deleted sources, and no double run across a restart.
import test from 'ava';
import { startBerth } from '../control-plane/server.ts';
import { type TestBerth, apiClient, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import fs from 'node:fs/promises';
import path from 'node:path';

const FIXTURE = path.resolve(import.meta.dirname, 'fixtures/functions/tick.ts');

type Run = { path: string; scheduledAt: string; outcome: string; error: string | null };

async function setup(t: { teardown(fn: () => Promise<void>): void }, start: string) {
  const clock = { now: new Date(start) };
  const t0: TestBerth = await startTestBerth({ cronTickMs: 0 }, { now: () => clock.now });
  t.teardown(() => t0.dispose());
  const site = await createSite(t0.owner);
  const written = await putFile(t0.owner, site.bucketId, 'cron/tick.ts', await fs.readFile(FIXTURE), 'text/typescript');
  const at = async (iso: string) => {
    clock.now = new Date(iso);
    await t0.berth.scheduler.tick();
  };
  const runs = async () => json<{ runs: Run[] }>(await t0.owner.read.get(`v0/sites/${site.id}/cron_runs`)).runs;
  const ticks = async () => {
    const res = await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/data/ticks.jsonl`, {
      responseType: 'text',
    });
    return res.statusCode === 404
      ? []
      : res.body
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { scheduled: string });
  };
  return { t0, site, written, at, runs, ticks, clock };
}

test('a cron job deploys with its schedule and runs at its times with the same ctx', async (t) => {
  const { t0, site, written, at, runs, ticks } = await setup(t, '2026-11-22T10:00:30Z');
  t.is(written.deployment?.status, 'READY');
  const fn = json<{ functions: Array<{ kind: string; schedule: string; nextRunAt: string }> }>(
    await t0.owner.read.get(`v0/sites/${site.id}/functions`),
  ).functions[0]!;
  t.like(fn, { kind: 'cron', schedule: '* * * * *', nextRunAt: '2026-11-22T10:01:00.000Z' });

  await at('2026-11-22T10:00:50Z');
  t.deepEqual(await runs(), [], 'a new job does not catch up on times before it existed');

  await at('2026-11-22T10:01:05Z');
  const first = await runs();
  t.is(first.length, 1);
  t.like(first[0], {
    path: 'cron/tick.ts',
    scheduledAt: '2026-11-22T10:01:00.000Z',
    outcome: 'SUCCEEDED',
    error: null,
  });
  t.like((await ticks())[0], { scheduled: '2026-11-22T10:01:00.000Z', method: 'POST', path: '/cron/tick' });

  await at('2026-11-22T10:01:40Z');
  t.is((await runs()).length, 1, 'one run per scheduled time');

  // Four times missed: one run, for the newest.
  await at('2026-11-22T10:05:10Z');
  const afterGap = await runs();
  t.is(afterGap.length, 2);
  t.is(afterGap[0]!.scheduledAt, '2026-11-22T10:05:00.000Z');
  t.is((await ticks()).length, 2);
});

test('invalid schedules fail the deployment with a precise reason', async (t) => {
  const t0 = await startTestBerth({ cronTickMs: 0 });
  t.teardown(() => t0.dispose());
  const site = await createSite(t0.owner);
  const cases: Array<[string, RegExp, number, number]> = [
    ['export const schedule = "61 * * * *";\nexport function handler() {}', /not a valid cron expression/, 1, 25],
    ['export const schedule = "0 0 * * * *";\nexport function handler() {}', /must have 5 fields/, 1, 25],
    ['export function handler() {}', /no schedule/, 1, 1],
    ['const s = "* * * * *";\nexport const schedule = s;\nexport function handler() {}', /string literal/, 2, 14],
    ['export const schedule = "* * * * *";\nexport default function () {}', /named "handler"/, 1, 1],
  ];
  for (const [source, message, line, column] of cases) {
    const written = await putFile(t0.owner, site.bucketId, 'cron/job.ts', source);
    t.is(written.deployment?.status, 'FAILED');
    t.regex(written.deployment!.error!.message, message);
    t.is(written.deployment!.error!.line, line);
    t.is(written.deployment!.error!.column, column);
  }
});

test('failures are recorded; a run still going makes the next time SKIPPED', async (t) => {
  const { t0, site, at, runs } = await setup(t, '2026-11-22T10:00:30Z');
  await putFile(t0.owner, site.bucketId, 'data/mode.txt', 'fail');
  await at('2026-11-22T10:01:01Z');
  t.like((await runs())[0], { outcome: 'FAILED', error: 'the job failed on purpose' });

  await putFile(t0.owner, site.bucketId, 'data/mode.txt', 'slow');
  const slow = at('2026-11-22T10:02:01Z');
  await new Promise((resolve) => setTimeout(resolve, 300));
  await at('2026-11-22T10:03:01Z');
  await slow;
  const [skipped, ran] = await runs();
  t.like(skipped, { scheduledAt: '2026-11-22T10:03:00.000Z', outcome: 'SKIPPED' });
  t.like(ran, { scheduledAt: '2026-11-22T10:02:00.000Z', outcome: 'SUCCEEDED' });
});

test('archived sites do not run jobs; deleting the source stops them', async (t) => {
  const { t0, site, at, runs } = await setup(t, '2026-11-22T10:00:30Z');
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
  await at('2026-11-22T10:01:10Z');
  t.deepEqual(await runs(), []);
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ACTIVE' } });
  await at('2026-11-22T10:02:10Z');
  t.is((await runs()).length, 1);

  await t0.owner.api.delete(`v0/buckets/${site.bucketId}/objects/cron/tick.ts`);
  await at('2026-11-22T10:03:10Z');
  t.is((await runs()).length, 1);
  t.deepEqual(json<{ functions: unknown[] }>(await t0.owner.read.get(`v0/sites/${site.id}/functions`)).functions, []);
});

test('a restart does not run a scheduled time twice', async (t) => {
  const { t0, site, at, runs, clock } = await setup(t, '2026-11-22T10:00:30Z');
  await at('2026-11-22T10:01:10Z');
  t.is((await runs()).length, 1);
  await t0.berth.close();
  const again = await startBerth(t0.config, { now: () => clock.now });
  t.teardown(() => again.close());
  await again.scheduler.tick();
  const api = apiClient(again.url, t0.owner.readKey);
  t.is(json<{ runs: Run[] }>(await api.get(`v0/sites/${site.id}/cron_runs`)).runs.length, 1);
  clock.now = new Date('2026-11-22T10:02:01Z');
  await again.scheduler.tick();
  t.is(json<{ runs: Run[] }>(await api.get(`v0/sites/${site.id}/cron_runs`)).runs.length, 2);
});
