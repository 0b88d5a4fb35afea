// Property tests of what the host reads from a worker, with fast-check: random bytes, truncated and
// oversized frames, and frames of every type in any order, cut into chunks anywhere. The reader and
// the inbound checks must only ever answer frames, FrameError or ProtocolViolation; the reader never
// holds more than a frame may have, and cutting the bytes differently changes nothing; and a real
// worker that sends such bytes is ended while the server goes on serving.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import fc from 'fast-check';
import { type TestBerth, createSite, deployFixture, putFile, startTestBerth } from '../helpers/berth.ts';
import { until } from '../helpers/until.ts';
import {
  type ChannelView,
  type Inbound,
  ProtocolViolation,
  inboundFrameBytes,
  readInbound,
} from '../../runtime-host/inbound.ts';
import { type Frame, FrameError, FrameReader, FrameType, HEADER_BYTES } from '../../runtime-host/protocol.ts';

const TYPES = [...Object.values(FrameType), 0, 13, 42, 255];
/** The largest whole frame the host accepts of any type. */
const LARGEST = Math.max(...Array.from({ length: 256 }, (_, type) => inboundFrameBytes(type)));

function header(size: number, type: number, stream: number): Uint8Array {
  const bytes = new Uint8Array(HEADER_BYTES);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, size);
  view.setUint8(4, type);
  view.setUint32(5, stream);
  return bytes;
}

const encode = (type: number, stream: number, payload: Uint8Array) =>
  concat([header(5 + payload.length, type, stream), payload]);

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** Payloads the checks look into: JSON of the right and wrong shapes, and plain bytes. */
const payload = fc.oneof(
  fc.uint8Array({ maxLength: 200 }),
  fc
    .oneof(
      fc.constant({ handler: 'default' }),
      fc.record({
        status: fc.integer({ min: 0, max: 1000 }),
        headers: fc.array(fc.array(fc.string(), { maxLength: 3 }), { maxLength: 3 }),
      }),
      fc.record({ requestId: fc.option(fc.string()), method: fc.string(), args: fc.anything() }, { requiredKeys: [] }),
      fc.record(
        {
          requestId: fc.option(fc.string()),
          level: fc.constantFrom('debug', 'info', 'warn', 'error', 'fatal'),
          message: fc.string(),
        },
        { requiredKeys: [] },
      ),
      fc.record({ message: fc.anything(), code: fc.anything(), status: fc.anything() }, { requiredKeys: [] }),
      fc.anything(),
    )
    .map((value) => new TextEncoder().encode(JSON.stringify(value) ?? 'undefined')),
);
const frameBytes = fc
  .tuple(fc.constantFrom(...TYPES), fc.oneof(fc.constant(0), fc.constant(1), fc.nat()), payload)
  .map(([type, stream, body]) => encode(type, stream, body));
/** One piece of a hostile stream: a frame, a frame cut short, a header declaring any size, or noise. */
const piece = fc.oneof(
  { arbitrary: frameBytes, weight: 4 },
  fc.tuple(frameBytes, fc.nat()).map(([bytes, cut]) => bytes.subarray(0, cut % (bytes.length + 1))),
  fc.tuple(fc.nat(), fc.constantFrom(...TYPES), fc.nat()).map(([size, type, stream]) => header(size, type, stream)),
  fc.uint8Array({ maxLength: 40 }),
);
const hostileStream = fc.array(piece, { maxLength: 12 }).map(concat);

/** Cuts `bytes` at the given points (taken modulo its length). */
function chunks(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((cut) => (bytes.length === 0 ? 0 : cut % bytes.length)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    out.push(bytes.subarray(from, point));
    from = point;
  }
  return out;
}

/** Feeds chunks to a fresh reader as the host does: frames until the first FrameError, which ends the worker. */
function read(pieces: Uint8Array[], afterEach: (reader: FrameReader) => void): { frames: Frame[]; refused: boolean } {
  const reader = new FrameReader(inboundFrameBytes);
  const frames: Frame[] = [];
  for (const chunk of pieces) {
    try {
      frames.push(...reader.push(chunk));
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      return { frames, refused: true };
    }
    afterEach(reader);
  }
  return { frames, refused: false };
}

test('the frame reader answers frames or FrameError, holds no more than a frame may, and cuts change nothing', (t) => {
  fc.assert(
    fc.property(hostileStream, fc.array(fc.nat(), { maxLength: 20 }), (bytes, cuts) => {
      const whole = read([bytes], () => {});
      const cut = read(chunks(bytes, cuts), (reader) => {
        if (reader.buffered > LARGEST) throw new Error(`the reader holds ${reader.buffered} bytes`);
      });
      // However the bytes are cut, the same frames come out, and the same stream is refused; a chunk
      // that ends in a refusal yields none of its frames, so a refused stream may lose a few.
      assert.equal(cut.refused, whole.refused);
      if (whole.refused) assert.deepEqual(cut.frames.slice(0, whole.frames.length), whole.frames);
      else assert.deepEqual(cut.frames, whole.frames);
    }),
    { numRuns: 2000 },
  );
  // And a header alone, declaring more than its type allows, is refused before its bytes arrive.
  fc.assert(
    fc.property(fc.constantFrom(...TYPES), fc.nat(), (type, stream) => {
      const reader = new FrameReader(inboundFrameBytes);
      assert.throws(() => reader.push(header(inboundFrameBytes(type) + 1, type, stream)), FrameError);
      assert.ok(reader.buffered <= HEADER_BYTES);
    }),
  );
  t.pass();
});

/** The channel as a worker keeps it, moved along by what each accepted frame was. */
function channel(): { view: ChannelView; apply(inbound: Inbound): void } {
  const streams = new Map<number, 'head' | 'body'>([
    [1, 'head'],
    [2, 'head'],
  ]);
  const view: ChannelView = { ready: false, lastCall: 0, response: (stream) => streams.get(stream) ?? null };
  return {
    view,
    apply(inbound) {
      if (inbound.type === 'ready') view.ready = true;
      else if (inbound.type === 'head') streams.set(inbound.stream, 'body');
      else if (inbound.type === 'end' || inbound.type === 'error') streams.delete(inbound.stream);
      else if (inbound.type === 'ctx') view.lastCall = inbound.stream;
    },
  };
}

test('the inbound checks accept or refuse frames of every type in any order, and throw nothing else', (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.tuple(
          fc.constantFrom(...TYPES),
          fc.oneof(fc.constant(0), fc.constant(1), fc.constant(2), fc.nat()),
          payload,
        ),
        { maxLength: 20 },
      ),
      (frames) => {
        const { view, apply } = channel();
        for (const [type, stream, body] of frames) {
          try {
            apply(readInbound({ type, stream, payload: body }, view));
          } catch (err) {
            if (!(err instanceof ProtocolViolation)) throw err;
            return; // The worker is stopped at its first violation.
          }
        }
      },
    ),
    { numRuns: 3000 },
  );
  t.pass();
});

let t1: TestBerth;
test.before(async () => {
  t1 = await startTestBerth({
    denoPath: path.resolve(import.meta.dirname, '../fixtures/hostile-deno.mjs'),
    functionTimeoutMs: 10_000,
    spareWorkers: 0,
  });
});
test.after.always(async () => {
  await t1?.dispose();
});

test('a real worker that writes hostile bytes to its channel is ended, and the server goes on serving', async (t) => {
  const bystander = await createSite(t1.owner);
  await deployFixture(t1.owner, bystander.bucketId, 'echo');
  const site = await createSite(t1.owner);
  const echo = fs.readFileSync(path.resolve(import.meta.dirname, '../fixtures/functions/echo.ts'), 'utf8');
  let run = 0;
  await fc.assert(
    fc.asyncProperty(hostileStream, async (bytes) => {
      const name = `fuzz-${++run}`;
      const written = await putFile(
        t1.owner,
        site.bucketId,
        `api/${name}.ts`,
        `${echo}\n// fuzz:${Buffer.from(bytes).toString('base64')}\n`,
        'text/typescript',
      );
      if (written.deployment?.status !== 'READY')
        throw new Error(`deployment failed: ${JSON.stringify(written.deployment)}`);
      const answer = await t1.site(site.subdomain).get(`api/${name}`, { timeout: { request: 20_000 } });
      if (answer.statusCode < 200 || answer.statusCode > 599) throw new Error(`answered ${answer.statusCode}`);
      // The worker hung up after its bytes: the host has ended it, whatever they were.
      await until(() => t1.berth.deps.runtime.workerCount <= 1, 'the fuzzed worker to be ended');
      const calm = await t1.site(bystander.subdomain).get('api/echo');
      if (calm.statusCode !== 200 || calm.body !== 'ok') throw new Error('another site’s function stopped answering');
    }),
    { numRuns: 25 },
  );
  t.is((await t1.anonymous.get('healthz')).statusCode, 200);
});
