// The replica's generations as Berth reads them from the engine's `generations` command: a generation
// begun and not yet written to (printed with the zero time as its bounds) holds nothing to restore and
// must not widen the restorable range to the whole retention.
import test from 'ava';
import { parseGenerations } from '../control-plane/site-databases/replication/litestream.ts';
import { restorableRange } from '../control-plane/site-databases/replication/timeline.ts';

const LISTING = [
  'name   generation        lag      start                 end',
  'berth  a1b2c3d4e5f60718  0s       2026-11-26T21:11:19Z  2026-11-26T21:11:40Z',
  'berth  0f1e2d3c4b5a6978  -1m0s    0001-01-01T00:00:00Z  0001-01-01T00:00:00Z',
  '',
].join('\n');

test('a generation with nothing written yet is left out of the listing and the range', (t) => {
  const generations = parseGenerations(LISTING);
  t.deepEqual(
    generations.map((g) => g.generation),
    ['a1b2c3d4e5f60718'],
  );
  const now = Date.parse('2026-11-26T21:11:45Z');
  const range = restorableRange(generations, now, 7 * 24 * 3600_000, 0);
  t.is(range?.earliest.toISOString(), '2026-11-26T21:11:20.000Z', 'from the second after the written generation began');
  t.is(range?.latest.toISOString(), '2026-11-26T21:11:45.000Z');
});

test('lines that are not generations are ignored', (t) => {
  t.deepEqual(parseGenerations('name generation lag start end\nberth x 0s not-a-time either\n'), []);
});
