// What a file write through the API waits on the metadata for: on PostgreSQL each wait is a round trip
// to the server, and those inside the write's transaction hold its locks (the site's, the file's, the
// account's) for every other writer of them. Counted by the metadata port itself (its round trips,
// SQLite counting the same calls) and Knex's own query events, on whichever backend the suite runs.
// Each figure is the fewest of several writes: something the server does in the background meanwhile
// can only add to one.
import test from 'ava';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';

let berth: TestBerth;
test.before(async () => {
  berth = await startTestBerth();
});
test.after.always(async () => {
  await berth?.dispose();
});

/** The metadata waits so far: the hot statements' round trips and every query Knex sends. */
function counter(): () => number {
  let knex = 0;
  berth.berth.deps.db.on('query', () => knex++);
  return () => knex + berth.berth.deps.hotSql.roundTrips;
}

/** The fewest metadata waits one of `times` calls of `write` took. */
async function fewestWaits(waits: () => number, write: (i: number) => Promise<unknown>, times = 5): Promise<number> {
  let fewest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < times; i++) {
    const before = waits();
    await write(i);
    fewest = Math.min(fewest, waits() - before);
  }
  return fewest;
}

test.serial(
  'a file write waits four times: its key, its account’s usage, then its transaction in two round trips, the site’s history and the change it publishes going with the commit',
  async (t) => {
    const waits = counter();
    const site = await createSite(berth.owner);
    const api = berth.owner.api;
    // The first write of a bucket checks it in the metadata; later ones know it.
    await putFile(berth.owner, site.bucketId, 'web/first.html', 'first');

    const bytes = (i: number) => `content ${i} ${Math.random()}`;
    t.is(await fewestWaits(waits, (i) => putFile(berth.owner, site.bucketId, `web/new-${i}.html`, bytes(i))), 4);
    t.is(
      await fewestWaits(waits, (i) => putFile(berth.owner, site.bucketId, 'web/same.html', bytes(i))),
      4,
      'an overwrite',
    );
    t.is(
      await fewestWaits(waits, (i) => putFile(berth.owner, site.bucketId, `data/item-${i}.json`, bytes(i))),
      4,
      'a write of data/, which no history records',
    );
    const current = await putFile(berth.owner, site.bucketId, 'web/guarded.html', 'v0');
    let expected = current.versionId;
    t.is(
      await fewestWaits(waits, async (i) => {
        const res = await api.put(`v0/buckets/${site.bucketId}/objects/web/guarded.html`, {
          body: bytes(i),
          headers: { 'if-match': expected },
        });
        t.is(res.statusCode, 200);
        expected = json<{ versionId: string }>(res).versionId;
      }),
      5,
      'If-Match is checked once more before the body is read',
    );

    // What the cut path still does: every write is in the site's history, numbered in order.
    const history = await api.get(`v0/sites/${site.id}/deployments`, { searchParams: { limit: 100 } });
    t.is(history.statusCode, 200);
    const seqs = json<{ deployments: Array<{ kind: string; seq: number }> }>(history)
      .deployments.filter((d) => d.kind === 'FILE')
      .map((d) => d.seq)
      .reverse();
    t.deepEqual(
      seqs,
      Array.from({ length: 1 + 5 + 5 + 1 + 5 }, (_, i) => i + 1),
      'one entry per write of web/',
    );
  },
);
