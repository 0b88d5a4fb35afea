// The worker channel trusts nothing: attacks of a hostile tenant on its own worker's channel, on the
// host's memory and on its neighbours. Each attack runs against a real server, and afterwards a
// function of another site must still answer and the server must still serve its API.
// Real functions run in real Deno; a worker whose channel is fully in the tenant's hands (as if user
// code had reached the socket) is played by test/fixtures/hostile-deno.mjs.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { pino } from 'pino';
import { type TestBerth, createSite, deployFixture, json, startTestBerth } from '../helpers/berth.ts';
import { type ChannelView, ProtocolViolation, inboundFrameBytes, readInbound } from '../../runtime-host/inbound.ts';
import { OutputLimit } from '../../runtime-host/output-limit.ts';
import {
  type Frame,
  FrameError,
  FrameReader,
  FrameType,
  type FrameTypeValue,
  MAX_LOG_CHARS,
  encodeFrame,
} from '../../runtime-host/protocol.ts';

const HOSTILE_DENO = path.resolve(import.meta.dirname, '../fixtures/hostile-deno.mjs');
const REPO = path.resolve(import.meta.dirname, '../..');

let t0: TestBerth;
let bystander: { subdomain: string; bucketId: string };
/** A server whose workers are all hostile-deno.mjs, and what it logs. */
let t1: TestBerth;
const t1Log: Array<{ level: number; msg: string; path?: string; violation?: string }> = [];
let t1Echo: { subdomain: string };

test.before(async () => {
  // Workers started with their function, each making its socket as it starts; spare workers, whose
  // sockets are made ahead of need, have tests of their own (spare-workers.test.ts).
  t0 = await startTestBerth({ functionTimeoutMs: 15_000, spareWorkers: 0 });
  bystander = await createSite(t0.owner);
  await deployFixture(t0.owner, bystander.bucketId, 'echo');
  const sink = new Writable({
    write(line: Buffer, _encoding, done) {
      t1Log.push(JSON.parse(line.toString()));
      done();
    },
  });
  t1 = await startTestBerth(
    { denoPath: HOSTILE_DENO, functionTimeoutMs: 10_000, spareWorkers: 0 },
    { log: pino({ level: 'warn' }, sink) },
  );
  const site = await createSite(t1.owner);
  await deployFixture(t1.owner, site.bucketId, 'echo');
  t1Echo = site;
});
test.after.always(async () => {
  await t0?.dispose();
  await t1?.dispose();
});

/** Another site's function answers, on both servers, and the API still serves. */
async function othersCarryOn(t: ExecutionContext) {
  t.is((await t0.site(bystander.subdomain).get('api/echo')).statusCode, 200, 'another site’s function keeps answering');
  t.is((await t0.anonymous.get('healthz')).statusCode, 200, 'the server keeps serving');
  const echo = await t1.site(t1Echo.subdomain).get('api/echo');
  t.is(echo.statusCode, 200);
  t.is(echo.body, 'ok');
}

const socketDir = (berth: TestBerth) => path.join(berth.dataDir, 'runtime', 'sockets');

/** Runs `start` and returns the path of every worker socket created meanwhile. */
async function socketsCreatedBy(berth: TestBerth, start: () => Promise<unknown>): Promise<string[]> {
  const seen = new Set<string>();
  const watcher = fs.watch(socketDir(berth), (_event, name) => {
    if (name?.endsWith('.sock')) seen.add(path.join(socketDir(berth), name));
  });
  try {
    await start();
  } finally {
    watcher.close();
  }
  return [...seen];
}

function rssSampler() {
  const start = process.memoryUsage().rss;
  let peak = start;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  return {
    growth() {
      clearInterval(timer);
      return Math.max(peak, process.memoryUsage().rss) - start;
    },
  };
}

interface LogLine {
  level: string;
  message: string;
}

async function siteLogs(berth: TestBerth, siteId: string): Promise<LogLine[]> {
  const lines: LogLine[] = [];
  for (let offset = 0; ; offset += 200) {
    const page = json<{ logs: LogLine[]; pagination: { hasMore: boolean } }>(
      await berth.owner.read.get(`v0/sites/${siteId}/logs`, { searchParams: { limit: '200', offset: String(offset) } }),
    );
    lines.push(...page.logs);
    if (!page.pagination.hasMore) return lines;
  }
}

/** Polls the site's logs until `done` holds (the drop marker comes once a quiet second has passed). */
async function logsWhen(berth: TestBerth, siteId: string, done: (lines: LogLine[]) => boolean): Promise<LogLine[]> {
  for (let i = 0; ; i++) {
    const lines = await siteLogs(berth, siteId);
    if (done(lines) || i === 40) return lines;
    await sleep(250);
  }
}

const isMarker = (line: LogLine) => /^… \d+ lines of output dropped/.test(line.message);

// ---------------------------------------------------------------------------------------------------
// Real functions in real Deno.

test.serial(
  'the top-level attack finds no channel: no socket path in Deno.args, and a connect with null CtxCall never happens',
  async (t) => {
    const site = await createSite(t0.owner);
    await deployFixture(t0.owner, site.bucketId, 'channel-attack');
    const res = await t0.site(site.subdomain).get('api/channel-attack');
    t.is(res.statusCode, 200);
    t.deepEqual(JSON.parse(res.body), { topLevel: 'no socket path', args: '[]' });
    await othersCarryOn(t);
  },
);

test.serial('a function can neither connect to, listen on nor remove its socket path, even knowing it', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'channel-attack');
  const [socketPath] = await socketsCreatedBy(t0, () => t0.site(site.subdomain).get('api/channel-attack'));
  t.truthy(socketPath, 'the worker’s socket was seen');
  const res = await t0
    .site(site.subdomain)
    .get('api/channel-attack', { searchParams: { path: socketPath, dir: socketDir(t0) } });
  t.like(JSON.parse(res.body), {
    connect: 'NotCapable',
    listen: 'NotCapable',
    remove: 'NotCapable',
    readDir: 'NotCapable',
  });
  await othersCarryOn(t);
});

test.serial(
  'a second connection to a worker’s socket finds nothing: the host stopped listening and removed the path',
  async (t) => {
    const site = await createSite(t0.owner);
    await deployFixture(t0.owner, site.bucketId, 'echo');
    const [socketPath] = await socketsCreatedBy(t0, () => t0.site(site.subdomain).get('api/echo'));
    t.truthy(socketPath);
    t.false(fs.existsSync(socketPath!));
    const error = await new Promise<NodeJS.ErrnoException>((resolve) =>
      net.connect(socketPath!).once('error', resolve),
    );
    t.is(error.code, 'ENOENT');
    t.is((await t0.site(site.subdomain).get('api/echo')).statusCode, 200, 'the worker kept its one channel');
    await othersCarryOn(t);
  },
);

test.serial(
  'functions do not learn host paths: arguments, main module, working dir, executable, stack traces',
  async (t) => {
    const site = await createSite(t0.owner);
    await deployFixture(t0.owner, site.bucketId, 'host-paths');
    const res = await t0.site(site.subdomain).get('api/host-paths');
    t.is(res.statusCode, 200);
    const seen = JSON.parse(res.body) as Record<string, unknown>;
    const text = JSON.stringify(seen);
    t.false(text.includes(t0.dataDir), 'nothing names the data dir');
    t.false(text.includes(REPO), 'nothing names where Berth is installed');
    t.false(text.includes(os.tmpdir()), 'nothing names the temp dir');
    t.deepEqual(seen.args, []);
    t.like(seen, {
      mainModule: 'file:///$deno$stdin.mts',
      cwd: '/',
      execPath: 'deno',
      prepareStackTrace: 'TypeError',
      processExecPath: 'deno',
      processArgv0: 'deno',
      stdin: '',
    });
    t.regex(
      seen.stack as string,
      /at default \(api\/host-paths\.ts:\d+:\d+\)/,
      'stack traces name the function by its site path',
    );
    // Deno's own report of an uncaught error, on stderr, reaches the site's logs rewritten the same way.
    await t0.site(site.subdomain).get('api/host-paths', { searchParams: { crash: '1' } });
    const logs = await logsWhen(t0, site.id, (all) => all.some((l) => l.message.includes('nobody catches this')));
    t.true(
      logs.some((l) => l.message.includes('api/host-paths.ts:')),
      'the report names the function by its site path',
    );
    for (const line of logs) t.false(line.message.includes(t0.dataDir) || line.message.includes(REPO), line.message);
    await othersCarryOn(t);
  },
);

test.serial('workers run at a lower CPU priority than the server, every thread of them', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'echo');
  const before = new Set(t0.berth.deps.runtime.workerPids());
  t.is((await t0.site(site.subdomain).get('api/echo')).statusCode, 200);
  const pid = t0.berth.deps.runtime.workerPids().find((p) => !before.has(p));
  t.truthy(pid);
  t.true(os.getPriority(pid!) > os.getPriority(process.pid));
  const threads = fs.readdirSync(`/proc/${pid}/task`).map(Number);
  t.true(threads.length > 1);
  for (const thread of threads) t.true(os.getPriority(thread) > os.getPriority(process.pid), `thread ${thread}`);
});

test.serial(
  'raw stdout floods keep server memory flat; lines are cut and one marker line counts the drop',
  async (t) => {
    const site = await createSite(t0.owner);
    await deployFixture(t0.owner, site.bucketId, 'flood');
    const memory = rssSampler();
    const flood = t0.site(site.subdomain).get('api/flood', { searchParams: { seconds: '3' } });
    await sleep(1000);
    await othersCarryOn(t);
    const res = await flood;
    const growth = memory.growth();
    t.is(res.statusCode, 200);
    t.true(growth < 100 * 1024 * 1024, `server RSS grew by ${Math.round(growth / 1048576)} MiB`);
    const lines = await logsWhen(t0, site.id, (all) => all.some(isMarker));
    const markers = lines.filter(isMarker);
    t.is(markers.length, 1, 'one marker line');
    const dropped = Number(/\d+/.exec(markers[0]!.message)![0]);
    t.true(dropped > 100_000, `${dropped} lines dropped`);
    const long = lines.filter((l) => l.message.startsWith('xxxx'));
    t.true(long.length >= 1);
    for (const line of long) t.is(line.message, `${'x'.repeat(MAX_LOG_CHARS)}… (truncated)`);
    t.true(lines.length <= 1001, `${lines.length} lines stored`);
    await othersCarryOn(t);
  },
);

// ---------------------------------------------------------------------------------------------------
// A worker whose channel is in the tenant's hands.

for (const [mode, violation] of [
  ['null-ctx', /CtxCall is not a JSON object/],
  ['bad-json', /CtxCall is not valid JSON/],
  ['unknown-type', /frames of type 42 are not accepted/],
  ['foreign-stream', /ResponseHead for stream \d+, which awaits none/],
  ['session-cookie', /invalid header name/],
  ['oversized', /declares 67108868 bytes, more than its limit/],
] as const) {
  test.serial(
    `a worker sending ${mode} is stopped with one log line and a 502, and nothing else is affected`,
    async (t) => {
      const site = await createSite(t1.owner);
      await deployFixture(t1.owner, site.bucketId, 'echo', mode);
      const logged = t1Log.length;
      const memory = rssSampler();
      const res = await t1.site(site.subdomain).get(`api/${mode}`);
      t.is(res.statusCode, 502);
      t.is(JSON.parse(res.body).error.code, 'function_protocol_error');
      t.true(memory.growth() < 50 * 1024 * 1024);
      const lines = t1Log.slice(logged).filter((l) => l.path === `api/${mode}.ts`);
      t.is(lines.length, 1, 'one log line');
      t.is(lines[0]!.msg, 'function worker broke the runtime protocol; stopped it');
      t.regex(lines[0]!.violation!, violation);
      t.is(lines[0]!.level, 40);
      await othersCarryOn(t);
    },
  );
}

test.serial('a flood of ctx calls is read no faster than they are served, and memory stays flat', async (t) => {
  const site = await createSite(t1.owner);
  await deployFixture(t1.owner, site.bucketId, 'echo', 'ctx-flood');
  const memory = rssSampler();
  const flood = t1.site(site.subdomain).get('api/ctx-flood');
  await sleep(1500);
  await othersCarryOn(t);
  const res = await flood;
  t.is(res.statusCode, 200);
  t.true(Number(res.body) > 0);
  const growth = memory.growth();
  t.true(growth < 100 * 1024 * 1024, `server RSS grew by ${Math.round(growth / 1048576)} MiB`);
});

test.serial(
  'a flood of Log frames is rate-limited per worker, with one marker line, and memory stays flat',
  async (t) => {
    const site = await createSite(t1.owner);
    await deployFixture(t1.owner, site.bucketId, 'echo', 'log-flood');
    const memory = rssSampler();
    const flood = t1.site(site.subdomain).get('api/log-flood');
    await sleep(1500);
    await othersCarryOn(t);
    const res = await flood;
    t.is(res.statusCode, 200);
    const growth = memory.growth();
    t.true(growth < 100 * 1024 * 1024, `server RSS grew by ${Math.round(growth / 1048576)} MiB`);
    const lines = await logsWhen(t1, site.id, (all) => all.some(isMarker));
    t.is(lines.filter(isMarker).length, 1);
    const stored = lines.filter((l) => l.message === 'flood').length;
    // 200 lines a second while the flood and its answer last.
    t.true(stored <= 200 * 6, `${stored} lines stored`);
    t.true(Number(/\d+/.exec(lines.find(isMarker)!.message)![0]) > 0);
  },
);

// ---------------------------------------------------------------------------------------------------
// Units: the frame reader and the host's frame checks.

const frameBytes = (type: number, stream: number, payload: string | Uint8Array = new Uint8Array(0)) =>
  encodeFrame(
    type as FrameTypeValue,
    stream,
    typeof payload === 'string' ? new TextEncoder().encode(payload) : payload,
  );

test('a frame declaring more than its type allows is refused at its header, before its bytes arrive', (t) => {
  const reader = new FrameReader(inboundFrameBytes);
  const header = new Uint8Array(9);
  new DataView(header.buffer).setUint32(0, 64 * 1024 * 1024);
  new DataView(header.buffer).setUint8(4, FrameType.CtxCall);
  t.deepEqual(reader.push(header.subarray(0, 5)), [], 'no verdict before the header is in');
  t.throws(() => reader.push(header.subarray(5)), {
    instanceOf: FrameError,
    message: /declares 67108868 bytes, more than its limit of 16777225/,
  });
  for (const type of [0, FrameType.Request, FrameType.CtxResult, FrameType.Cancel, 42]) {
    t.throws(
      () => new FrameReader(inboundFrameBytes).push(frameBytes(type, 1)),
      { instanceOf: FrameError },
      `type ${type}`,
    );
  }
  t.throws(
    () =>
      new FrameReader(inboundFrameBytes).push(frameBytes(FrameType.ResponseChunk, 1, new Uint8Array(256 * 1024 + 1))),
    { instanceOf: FrameError },
  );
  t.throws(() => new FrameReader(inboundFrameBytes).push(frameBytes(FrameType.ResponseEnd, 1, 'x')), {
    instanceOf: FrameError,
  });
  const tooShort = new Uint8Array(9);
  new DataView(tooShort.buffer).setUint32(0, 4);
  t.throws(() => new FrameReader().push(tooShort), { instanceOf: FrameError, message: /invalid frame length 4/ });
});

test('the reader takes caps per frame type from its caller', (t) => {
  const reader = new FrameReader((type) => (type === 1 ? 9 + 3 : 0));
  t.is(reader.push(frameBytes(1, 0, 'abc')).length, 1);
  t.throws(() => reader.push(frameBytes(1, 0, 'abcd')), { instanceOf: FrameError });
});

/** Bytes copied by Uint8Array#set while `run` runs. */
function copiedBytes(run: () => void): number {
  const set = Uint8Array.prototype.set;
  let copied = 0;
  Uint8Array.prototype.set = function (this: Uint8Array, source: ArrayLike<number>, offset?: number) {
    copied += source.length;
    return set.call(this, source, offset);
  } as typeof set;
  try {
    run();
  } finally {
    Uint8Array.prototype.set = set;
  }
  return copied;
}

test('a large frame arriving in small chunks is assembled in linear time, intact', (t) => {
  const payload = new Uint8Array(8 * 1024 * 1024);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31) % 251;
  const bytes = frameBytes(FrameType.CtxCall, 7, payload);
  const reader = new FrameReader();
  const frames: Frame[] = [];
  const copied = copiedBytes(() => {
    for (let offset = 0; offset < bytes.length; offset += 64 * 1024)
      frames.push(...reader.push(bytes.subarray(offset, offset + 64 * 1024)));
  });
  t.is(frames.length, 1);
  t.is(frames[0]!.stream, 7);
  t.true(Buffer.from(frames[0]!.payload).equals(payload), 'the payload arrives intact');
  t.true(copied <= 2 * bytes.length, `${copied} bytes copied for a ${bytes.length}-byte frame`);
});

test('tiny reads are gathered, not kept one by one, and frames split anywhere come out whole', (t) => {
  const stream = [
    frameBytes(FrameType.Log, 0, '{"a":1}'),
    frameBytes(FrameType.ResponseEnd, 3),
    frameBytes(FrameType.CtxCall, 9, 'x'.repeat(100_000)),
  ];
  const all = new Uint8Array(stream.reduce((n, f) => n + f.length, 0));
  let offset = 0;
  for (const f of stream) {
    all.set(f, offset);
    offset += f.length;
  }
  for (const size of [1, 7, 9, 4096, 70_000]) {
    const reader = new FrameReader();
    const frames: Frame[] = [];
    const copied = copiedBytes(() => {
      for (let offset = 0; offset < all.length; offset += size)
        frames.push(...reader.push(all.slice(offset, offset + size)));
    });
    t.deepEqual(
      frames.map((f) => [f.type, f.stream, f.payload.length]),
      [
        [FrameType.Log, 0, 7],
        [FrameType.ResponseEnd, 3, 0],
        [FrameType.CtxCall, 9, 100_000],
      ],
      `reads of ${size}`,
    );
    t.true(copied <= 3 * all.length, `reads of ${size}: ${copied} bytes copied`);
  }
  const partial = new FrameReader();
  t.deepEqual(partial.push(all.subarray(0, 12)), [], 'a truncated frame waits for the rest');
});

function view(
  state: Partial<{ ready: boolean; lastCall: number; streams: Record<number, 'head' | 'body'> }> = {},
): ChannelView {
  return {
    ready: state.ready ?? true,
    lastCall: state.lastCall ?? 0,
    response: (stream) => state.streams?.[stream] ?? null,
  };
}

const inbound = (type: number, stream: number, payload: string = '') => ({
  type,
  stream,
  payload: new TextEncoder().encode(payload),
});

test('well-formed frames pass the host’s checks', (t) => {
  t.like(readInbound(inbound(FrameType.Ready, 0, '{"handler":"default"}'), view({ ready: false })), { type: 'ready' });
  t.like(
    readInbound(inbound(FrameType.Log, 0, '{"requestId":null,"level":"info","message":"hi"}'), view({ ready: false })),
    { type: 'log' },
  );
  t.like(
    readInbound(
      inbound(FrameType.ResponseHead, 1, '{"status":200,"headers":[["content-type","text/plain"]]}'),
      view({ streams: { 1: 'head' } }),
    ),
    { type: 'head' },
  );
  t.like(readInbound(inbound(FrameType.ResponseChunk, 1, 'bytes'), view({ streams: { 1: 'body' } })), {
    type: 'chunk',
  });
  t.like(readInbound(inbound(FrameType.ResponseEnd, 1), view({ streams: { 1: 'body' } })), { type: 'end' });
  t.like(
    readInbound(
      inbound(FrameType.ResponseError, 1, '{"message":"x","code":"c","status":418}'),
      view({ streams: { 1: 'head' } }),
    ),
    { type: 'error' },
  );
  t.like(
    readInbound(
      inbound(FrameType.CtxCall, 5, '{"requestId":"r","method":"data.readText","args":["a"]}'),
      view({ lastCall: 4 }),
    ),
    { type: 'ctx' },
  );
});

test('every frame type with a bad payload, stream or timing is a protocol violation', (t) => {
  const streams = { 1: 'head', 2: 'body' } as const;
  const cases: Array<[string, ReturnType<typeof inbound>, ChannelView]> = [
    ['Ready twice', inbound(FrameType.Ready, 0, '{"handler":"default"}'), view()],
    ['Ready on a stream', inbound(FrameType.Ready, 3, '{"handler":"default"}'), view({ ready: false })],
    ['Ready without a handler', inbound(FrameType.Ready, 0, '{"handler":"other"}'), view({ ready: false })],
    ['Ready null', inbound(FrameType.Ready, 0, 'null'), view({ ready: false })],
    [
      'a request frame before Ready',
      inbound(FrameType.ResponseHead, 1, '{"status":200,"headers":[]}'),
      view({ ready: false, streams }),
    ],
    [
      'a ctx call before Ready',
      inbound(FrameType.CtxCall, 1, '{"requestId":null,"method":"x","args":[]}'),
      view({ ready: false }),
    ],
    [
      'head for an unknown stream',
      inbound(FrameType.ResponseHead, 9, '{"status":200,"headers":[]}'),
      view({ streams }),
    ],
    ['a second head', inbound(FrameType.ResponseHead, 2, '{"status":200,"headers":[]}'), view({ streams })],
    ['head with a bad status', inbound(FrameType.ResponseHead, 1, '{"status":99,"headers":[]}'), view({ streams })],
    [
      'head with a fractional status',
      inbound(FrameType.ResponseHead, 1, '{"status":200.5,"headers":[]}'),
      view({ streams }),
    ],
    [
      'head with headers not a list',
      inbound(FrameType.ResponseHead, 1, '{"status":200,"headers":{}}'),
      view({ streams }),
    ],
    [
      'head with a malformed header',
      inbound(FrameType.ResponseHead, 1, '{"status":200,"headers":[["a"]]}'),
      view({ streams }),
    ],
    [
      'head with a header value holding CRLF',
      inbound(FrameType.ResponseHead, 1, '{"status":200,"headers":[["x","a\\r\\nset-cookie: y"]]}'),
      view({ streams }),
    ],
    [
      'head with an uppercase header name',
      inbound(FrameType.ResponseHead, 1, '{"status":200,"headers":[["Set-Cookie","_berth_session=x"]]}'),
      view({ streams }),
    ],
    ['head that is not JSON', inbound(FrameType.ResponseHead, 1, '{"status":'), view({ streams })],
    [
      'head that is invalid UTF-8',
      { type: FrameType.ResponseHead, stream: 1, payload: new Uint8Array([0xff, 0xfe]) },
      view({ streams }),
    ],
    ['chunk before the head', inbound(FrameType.ResponseChunk, 1, 'x'), view({ streams })],
    ['chunk for an unknown stream', inbound(FrameType.ResponseChunk, 9, 'x'), view({ streams })],
    ['end before the head', inbound(FrameType.ResponseEnd, 1), view({ streams })],
    ['end for an unknown stream', inbound(FrameType.ResponseEnd, 0), view({ streams })],
    ['end with a payload', inbound(FrameType.ResponseEnd, 2, 'x'), view({ streams })],
    ['error for an unknown stream', inbound(FrameType.ResponseError, 9, '{"message":"x"}'), view({ streams })],
    ['error without a message', inbound(FrameType.ResponseError, 1, '{"code":"x"}'), view({ streams })],
    ['error with a bad code', inbound(FrameType.ResponseError, 1, '{"message":"x","code":7}'), view({ streams })],
    [
      'error with a bad status',
      inbound(FrameType.ResponseError, 1, '{"message":"x","status":"500"}'),
      view({ streams }),
    ],
    ['error that is an array', inbound(FrameType.ResponseError, 1, '[]'), view({ streams })],
    ['ctx call null', inbound(FrameType.CtxCall, 1, 'null'), view()],
    ['ctx call without a method', inbound(FrameType.CtxCall, 1, '{"requestId":null,"args":[]}'), view()],
    [
      'ctx call with arguments not a list',
      inbound(FrameType.CtxCall, 1, '{"requestId":null,"method":"x","args":{}}'),
      view(),
    ],
    ['ctx call with a bad request id', inbound(FrameType.CtxCall, 1, '{"requestId":5,"method":"x","args":[]}'), view()],
    [
      'ctx call reusing an id',
      inbound(FrameType.CtxCall, 4, '{"requestId":null,"method":"x","args":[]}'),
      view({ lastCall: 4 }),
    ],
    ['ctx call with id 0', inbound(FrameType.CtxCall, 0, '{"requestId":null,"method":"x","args":[]}'), view()],
    ['log on a stream', inbound(FrameType.Log, 1, '{"requestId":null,"level":"info","message":"x"}'), view()],
    ['log with a bad level', inbound(FrameType.Log, 0, '{"requestId":null,"level":"fatal","message":"x"}'), view()],
    ['log without a message', inbound(FrameType.Log, 0, '{"requestId":null,"level":"info"}'), view()],
    ['a host-to-worker frame type', inbound(FrameType.Request, 1), view()],
    ['a CtxResult', inbound(FrameType.CtxResult, 1, '{"ok":true}'), view()],
    ['an unknown type', inbound(42, 0), view()],
  ];
  for (const [name, frame, channel] of cases)
    t.throws(() => readInbound(frame, channel), { instanceOf: ProtocolViolation }, name);
});

test('output past the budget is dropped and reported by one marker line once the flood is over', (t) => {
  let now = 0;
  const emitted: string[] = [];
  const limit = new OutputLimit(
    { lines: 3, chars: 100_000, rawBytes: 1024, windowMs: 1000 },
    (entry) => emitted.push(entry.message),
    () => now,
  );
  for (let i = 0; i < 10; i++) limit.accept({ requestId: null, level: 'info', message: `line ${i}` });
  now = 1000;
  limit.accept({ requestId: null, level: 'info', message: 'still flooding' });
  t.deepEqual(emitted, ['line 0', 'line 1', 'line 2'], 'the flood goes on while a window is over budget');
  now = 2000;
  limit.accept({ requestId: null, level: 'info', message: 'after' });
  t.deepEqual(emitted.slice(3), [
    '… 8 lines of output dropped (over 3 lines or 100000 characters per second)',
    'after',
  ]);
  limit.accept({ requestId: null, level: 'info', message: 'y'.repeat(MAX_LOG_CHARS + 5) });
  t.is(emitted.at(-1), `${'y'.repeat(MAX_LOG_CHARS)}… (truncated)`);
  t.is(limit.takeRaw(1000), 0);
  t.is(limit.takeRaw(100), 1000, 'raw output past its bytes waits for the next window');
  limit.close();
});
