// Spare workers widen nothing: a spare starts with the command line of any worker, a function it is
// given reads no more files than one started with its function, its errors name the same lines and
// columns, and the host alone decides which site a spare serves. A spare whose channel is in a
// hostile tenant's hands is played by test/fixtures/hostile-spare.mjs.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import { pino } from 'pino';
import {
  type TestBerth,
  createSite,
  deployFixture,
  json,
  makeDataDir,
  putFile,
  startTestBerth,
} from '../helpers/berth.ts';
import { type ChannelView, ProtocolViolation, readInbound } from '../../runtime-host/inbound.ts';
import { FrameType } from '../../runtime-host/protocol.ts';
import { until } from '../helpers/until.ts';

const HOSTILE_SPARE = path.resolve(import.meta.dirname, '../fixtures/hostile-spare.mjs');
const REPO = path.resolve(import.meta.dirname, '../..');

/** Spares on; and the same server's behaviour with none, where every worker starts with its function. */
let spares: TestBerth;
let direct: TestBerth;

test.before(async () => {
  [spares, direct] = await Promise.all([startTestBerth({ spareWorkers: 2 }), startTestBerth({ spareWorkers: 0 })]);
});
test.after.always(async () => {
  await Promise.all([spares?.dispose(), direct?.dispose()]);
});

const standby = (berth: TestBerth, count: number) =>
  until(
    () => berth.berth.deps.runtime.sparePids().length >= count && berth.berth.deps.runtime.sparePids(),
    `${count} spares on standby`,
  );

const commandLine = (pid: number) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
const socketOf = (pid: number) =>
  commandLine(pid)
    .find((arg) => arg.startsWith('--allow-read='))!
    .slice('--allow-read='.length)
    .split(',')[0]!;

/** Calls a function and returns the response with the pid of the worker that was started for it. */
async function coldCall(
  berth: TestBerth,
  subdomain: string,
  urlPath: string,
  searchParams: Record<string, string> = {},
) {
  const before = new Set(berth.berth.deps.runtime.workerPids());
  const res = await berth.site(subdomain).get(urlPath, { searchParams });
  const pid = berth.berth.deps.runtime.workerPids().find((p) => !before.has(p));
  return { res, pid };
}

async function deploySource(berth: TestBerth, name: string, source: string) {
  const site = await createSite(berth.owner);
  const written = await putFile(berth.owner, site.bucketId, `api/${name}.ts`, source, 'text/typescript');
  if (written.deployment?.status !== 'READY')
    throw new Error(`deployment failed: ${JSON.stringify(written.deployment)}`);
  return { site, functionId: written.deployment.functionId!, versionId: written.versionId };
}

test.serial(
  'a spare starts with the command line of a worker started with its function, but for its socket paths',
  async (t) => {
    const [sparePid] = await standby(spares, 1);
    const site = await createSite(direct.owner);
    await deployFixture(direct.owner, site.bucketId, 'echo');
    const { pid: directPid } = await coldCall(direct, site.subdomain, 'api/echo');
    // Two servers, so two egress proxies: their ports differ.
    const normal = (pid: number) =>
      commandLine(pid).map((arg) => arg.replaceAll(socketOf(pid), '<socket>').replace(/127\.0\.0\.1:\d+/, '<egress>'));
    t.deepEqual(normal(sparePid!), normal(directPid!));
    const allowed = normal(sparePid!).filter((arg) => arg.startsWith('--allow'));
    t.is(
      allowed[0],
      '--allow-net=<egress>,unix:<socket>,unix:<socket>.db',
      'the egress proxy, its own socket and its database line’s, nowhere else',
    );
    t.deepEqual(
      allowed.slice(1),
      ['--allow-read=<socket>,<socket>.db', '--allow-write=<socket>,<socket>.db'],
      'and those two paths until it has connected to one and listens on the other: nothing else',
    );
  },
);

// Reads and imports of host files, from a function in a worker started with its function and in a
// spare given one; both must be refused, and alike.
const PROBE = `async function attempt(action: () => unknown): Promise<string> {
  try {
    await action();
    return 'allowed';
  } catch (error) {
    return (error as Error).name;
  }
}

export default async function (req: Request): Promise<Response> {
  const indirect = globalThis.eval;
  const results: Record<string, Record<string, string>> = {};
  for (const [role, target] of new URL(req.url).searchParams) {
    const url = 'file://' + target;
    results[role] = {
      read: await attempt(() => Deno.readFile(target)),
      stat: await attempt(() => Deno.stat(target)),
      readDir: await attempt(() => Deno.readDir(target)[Symbol.asyncIterator]().next()),
      import: await attempt(() => indirect('import(' + JSON.stringify(url) + ')')),
      fetch: await attempt(() => fetch(url).then((r) => r.body?.cancel())),
    };
  }
  return Response.json(results);
}
`;

async function probe(berth: TestBerth) {
  const { site, functionId, versionId } = await deploySource(berth, 'probe', PROBE);
  const runtimeDir = path.join(berth.dataDir, 'runtime');
  const modulePath = path.join(runtimeDir, 'functions', functionId, versionId, 'function.ts');
  const targets = {
    module: modulePath,
    moduleDir: path.dirname(modulePath),
    runtimeDir,
    sockets: path.join(runtimeDir, 'sockets'),
    dataDir: berth.dataDir,
    masterKey: path.join(berth.dataDir, 'master.key'),
  };
  for (const target of Object.values(targets)) if (!fs.existsSync(target)) throw new Error(`${target} should exist`);
  const { res, pid } = await coldCall(berth, site.subdomain, 'api/probe', targets);
  return { results: JSON.parse(res.body) as Record<string, Record<string, string>>, pid: pid! };
}

test.serial(
  'a function given to a spare reads no host file, its own module and the runtime dir included, as before',
  async (t) => {
    const onStandby = await standby(spares, 1);
    const fromSpare = await probe(spares);
    t.true(onStandby.includes(fromSpare.pid), 'the call was served by a spare');
    const fromDirect = await probe(direct);
    for (const [role, outcomes] of Object.entries(fromSpare.results)) {
      for (const [action, outcome] of Object.entries(outcomes)) t.not(outcome, 'allowed', `${action} of ${role}`);
    }
    // A worker started with its function loaded that file as part of its program, so importing it
    // again finds it loaded; a spare got the same source over its channel and may not import the file.
    t.is(fromDirect.results.module!.import, 'allowed');
    t.is(fromSpare.results.module!.import, 'TypeError');
    delete fromSpare.results.module!.import;
    delete fromDirect.results.module!.import;
    t.deepEqual(fromSpare.results, fromDirect.results, 'everything else is refused alike with spares and without');
    t.is(fromSpare.results.module!.read, 'NotCapable');
    t.is(fromSpare.results.runtimeDir!.readDir, 'NotCapable');
  },
);

// Types before the error on its line: a position that is not source-mapped would be off. Its text
// is not ASCII: the source reaches a spare as UTF-8 bytes.
const WHERE = `type Shape = { side: number };
export default function (req: Request): Response {
  const shape: Shape = { side: 2 }; const area: number = shape.side * shape.side; const error: Error = new Error(area + ' m²');
  if (new URL(req.url).searchParams.has('crash')) {
    void Promise.reject(error);
    return new Response('crashing');
  }
  return new Response(error.stack);
}
`;
const WHERE_COLUMN = WHERE.split('\n')[2]!.indexOf('new Error') + 1;

async function siteLogs(berth: TestBerth, siteId: string): Promise<string[]> {
  return json<{ logs: Array<{ message: string }> }>(
    await berth.owner.read.get(`v0/sites/${siteId}/logs`, { searchParams: { limit: '200' } }),
  ).logs.map((l) => l.message);
}

test.serial('stack traces and Deno’s own error reports name the same lines and columns from a spare', async (t) => {
  const onStandby = await standby(spares, 1);
  const seen = [];
  for (const berth of [spares, direct]) {
    const { site } = await deploySource(berth, 'where', WHERE);
    const { res, pid } = await coldCall(berth, site.subdomain, 'api/where');
    await berth.site(site.subdomain).get('api/where', { searchParams: { crash: '1' } });
    // Deno reports the unhandled rejection on stderr, which the host rewrites line by line into the site's logs.
    const report = await until(
      async () => (await siteLogs(berth, site.id)).find((line) => line.trim().startsWith('at default (')),
      'Deno’s report',
    );
    seen.push({ stack: res.body, pid: pid!, report });
  }
  const [fromSpare, fromDirect] = seen as [(typeof seen)[0], (typeof seen)[0]];
  t.true(onStandby.includes(fromSpare.pid), 'the first call was served by a spare');
  const at = `at default (api/where.ts:3:${WHERE_COLUMN})`;
  t.true(fromSpare.stack.startsWith(`Error: 4 m²\n    ${at}\n`), fromSpare.stack);
  // The frames below the function's are Berth's own: a spare reached run() through standby().
  const top = (stack: string) => stack.split('\n').slice(0, 2);
  t.deepEqual(top(fromSpare.stack), top(fromDirect.stack));
  t.is(fromSpare.report.trim(), at);
  t.is(fromSpare.report, fromDirect.report);
});

test.serial(
  'a function given to a spare learns no host path, and can neither reach its own socket nor a spare’s',
  async (t) => {
    const onStandby = await standby(spares, 2);
    const site = await createSite(spares.owner);
    await deployFixture(spares.owner, site.bucketId, 'host-paths');
    const { res, pid } = await coldCall(spares, site.subdomain, 'api/host-paths');
    t.true(onStandby.includes(pid!), 'the call was served by a spare');
    const seen = JSON.parse(res.body) as Record<string, unknown>;
    const text = JSON.stringify(seen);
    for (const hostPath of [spares.dataDir, REPO, os.tmpdir(), 'data:']) t.false(text.includes(hostPath), hostPath);
    t.like(seen, {
      args: [],
      mainModule: 'file:///$deno$stdin.mts',
      cwd: '/',
      execPath: 'deno',
      prepareStackTrace: 'TypeError',
      processExecPath: 'deno',
      stdin: '',
    });
    t.regex(seen.stack as string, /at default \(api\/host-paths\.ts:\d+:\d+\)/);

    // Its own socket, and that of a spare still on standby: both connected long ago and are gone.
    const attack = await createSite(spares.owner);
    await deployFixture(spares.owner, attack.bucketId, 'channel-attack');
    await standby(spares, 1);
    const first = await coldCall(spares, attack.subdomain, 'api/channel-attack');
    t.deepEqual(JSON.parse(first.res.body), { topLevel: 'no socket path', args: '[]' });
    const neighbour = (await standby(spares, 1))[0]!;
    t.not(neighbour, first.pid);
    const dir = path.join(spares.dataDir, 'runtime', 'sockets');
    for (const target of [socketOf(first.pid!), socketOf(neighbour)]) {
      const tried = await spares
        .site(attack.subdomain)
        .get('api/channel-attack', { searchParams: { path: target, dir } });
      t.like(JSON.parse(tried.body), {
        connect: 'NotCapable',
        listen: 'NotCapable',
        remove: 'NotCapable',
        readDir: 'NotCapable',
      });
      t.false(fs.existsSync(target));
      const error = await new Promise<NodeJS.ErrnoException>((resolve) => net.connect(target).once('error', resolve));
      t.is(error.code, 'ENOENT');
    }
    t.is(
      (await spares.site(attack.subdomain).get('api/channel-attack')).statusCode,
      200,
      'the worker kept its one channel',
    );
  },
);

test.serial(
  'spares and the workers made of them run at a lower CPU priority than the server, every thread',
  async (t) => {
    const [spare] = await standby(spares, 1);
    const site = await createSite(spares.owner);
    await deployFixture(spares.owner, site.bucketId, 'echo');
    const { pid } = await coldCall(spares, site.subdomain, 'api/echo');
    t.is(pid, spare, 'the call was served by the spare');
    const [next] = await standby(spares, 1);
    for (const process of [pid!, next!]) {
      for (const thread of fs.readdirSync(`/proc/${process}/task`).map(Number))
        t.true(os.getPriority(thread) > os.getPriority(), `thread ${thread} of ${process}`);
    }
  },
);

test('a spare may say only that it is on standby, once, and nothing while it waits for its function', (t) => {
  const frame = (type: number, payload = '', stream = 0) => ({
    type,
    stream,
    payload: new TextEncoder().encode(payload),
  });
  const channel = (spare: ChannelView['spare']): ChannelView => ({
    ready: false,
    spare,
    lastCall: 0,
    response: () => null,
  });
  t.deepEqual(readInbound(frame(FrameType.Standby), channel('announce')), { type: 'standby' });
  const refused: Array<[string, ReturnType<typeof frame>, ChannelView]> = [
    ['Ready instead of Standby', frame(FrameType.Ready, '{"handler":"default"}'), channel('announce')],
    [
      'a ctx call before Standby',
      frame(FrameType.CtxCall, '{"requestId":null,"method":"data.readText","args":["x"]}', 1),
      channel('announce'),
    ],
    [
      'a log line before Standby',
      frame(FrameType.Log, '{"requestId":null,"level":"info","message":"x"}'),
      channel('announce'),
    ],
    ['Standby on a stream', frame(FrameType.Standby, '', 1), channel('announce')],
    ['Standby with a payload', frame(FrameType.Standby, 'x'), channel('announce')],
    ['a second Standby', frame(FrameType.Standby), channel('waiting')],
    ['Ready before being given a function', frame(FrameType.Ready, '{"handler":"default"}'), channel('waiting')],
    [
      'a ctx call on standby',
      frame(FrameType.CtxCall, '{"requestId":null,"method":"data.readText","args":["x"]}', 1),
      channel('waiting'),
    ],
    [
      'a log line on standby',
      frame(FrameType.Log, '{"requestId":null,"level":"info","message":"x"}'),
      channel('waiting'),
    ],
    ['Standby from a worker started with its function', frame(FrameType.Standby), channel(undefined)],
    ['Standby from a bound worker', frame(FrameType.Standby), { ...channel(undefined), ready: true }],
  ];
  for (const [name, sent, view] of refused)
    t.throws(() => readInbound(sent, view), { instanceOf: ProtocolViolation }, name);
});

const BROKEN = `const ready: boolean = false;
if (!ready) throw new Error('not ready');
export default () => new Response('never');
`;

test.serial('a function whose top level throws is reported at its line and column from a spare too', async (t) => {
  const onStandby = await standby(spares, 2);
  const reports = [];
  for (const berth of [spares, direct]) {
    const { site } = await deploySource(berth, 'broken', BROKEN);
    const res = await berth.site(site.subdomain).get('api/broken');
    t.is(JSON.parse(res.body).error.code, 'function_start_failed');
    reports.push(
      await until(
        async () => (await siteLogs(berth, site.id)).find((line) => line.includes('api/broken.ts:')),
        'Deno’s report',
      ),
    );
  }
  await until(
    () => onStandby.some((pid) => !fs.existsSync(`/proc/${pid}`)),
    'the spare given the function to stop with it',
  );
  t.is(reports[0]!.trim(), 'at api/broken.ts:2:19');
  t.is(reports[0], reports[1]);
});

// ---------------------------------------------------------------------------------------------------
// A spare whose channel is in the tenant's hands.

interface Hostile {
  berth: TestBerth;
  log: Array<{ level: number; msg: string; violation?: string }>;
}

/** A server whose Deno is hostile-spare.mjs in `mode`: its spares misbehave, its other workers do not. */
async function hostile(t: ExecutionContext, mode: string): Promise<Hostile> {
  const dir = await makeDataDir(t);
  const wrapper = path.join(dir, 'deno');
  fs.writeFileSync(
    wrapper,
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(HOSTILE_SPARE)} ${mode} "$@"\n`,
    { mode: 0o755 },
  );
  const log: Hostile['log'] = [];
  const sink = new Writable({
    write(line: Buffer, _encoding, done) {
      log.push(JSON.parse(line.toString()));
      done();
    },
  });
  const berth = await startTestBerth(
    { denoPath: wrapper, spareWorkers: 1, functionTimeoutMs: 10_000 },
    { log: pino({ level: 'warn' }, sink) },
  );
  t.teardown(() => berth.dispose());
  return { berth, log };
}

const files = async (berth: TestBerth, bucketId: string) =>
  json<{ files: Array<{ path: string }> }>(await berth.owner.read.get(`v0/buckets/${bucketId}/objects`)).files.map(
    (f) => f.path,
  );

for (const [mode, violation] of [
  ['early-ctx', /^frame type 7 from a spare before Standby$/],
  ['ready-on-standby', /^frame type 1 from a spare waiting for its function$/],
  ['ctx-on-standby', /^frame type 7 from a spare waiting for its function$/],
] as const) {
  test(`a spare sending ${mode} is stopped with a log line, serves nothing, and functions still answer`, async (t) => {
    const { berth, log } = await hostile(t, mode);
    const stopped = await until(
      () => log.find((line) => line.msg === 'a spare function worker broke the runtime protocol; stopped it'),
      'the violation',
    );
    t.regex(stopped.violation!, violation);
    t.is(stopped.level, 40);
    const site = await createSite(berth.owner);
    await deployFixture(berth.owner, site.bucketId, 'echo');
    const res = await berth.site(site.subdomain).get('api/echo');
    t.is(res.statusCode, 200, 'a worker started with its function answers');
    t.is(res.body, '"ok"');
    t.deepEqual(await files(berth, site.bucketId), ['api/echo.ts'], 'no ctx call of the spare was served');
  });
}

test('a spare that breaks the protocol while it is given its function is stopped, and the call gets a worker of its own', async (t) => {
  const { berth, log } = await hostile(t, 'ctx-on-load');
  const site = await createSite(berth.owner);
  await deployFixture(berth.owner, site.bucketId, 'echo');
  const res = await berth.site(site.subdomain).get('api/echo');
  t.is(res.statusCode, 200, 'a worker started for the call answers it');
  t.is(res.body, '"ok"');
  const stopped = log.find((line) => line.msg === 'function worker broke the runtime protocol; stopped it');
  t.regex(stopped?.violation ?? '', /^frame type 7 /);
  t.deepEqual(await files(berth, site.bucketId), ['api/echo.ts'], 'no ctx call of the spare was served');
});

test('a spare serves the site the host gave it, whatever site it names', async (t) => {
  const { berth } = await hostile(t, 'bound');
  const [mine, other] = [await createSite(berth.owner), await createSite(berth.owner)];
  await putFile(berth.owner, mine.bucketId, 'data/x.txt', 'mine');
  await putFile(berth.owner, other.bucketId, 'data/x.txt', 'the other site’s');
  const onStandby = await standby(berth, 1);
  await putFile(
    berth.owner,
    mine.bucketId,
    'api/bound.ts',
    `// other site: ${other.id}\nexport default () => new Response('');\n`,
    'text/typescript',
  );
  const { res, pid } = await coldCall(berth, mine.subdomain, 'api/bound');
  t.true(onStandby.includes(pid!), 'the call was served by the spare');
  t.like(JSON.parse(res.body), {
    toldSite: mine.id,
    read: { ok: true, value: 'mine' },
    write: { ok: true, value: { path: 'data/y.txt' } },
  });
  t.deepEqual(await files(berth, mine.bucketId), ['api/bound.ts', 'data/x.txt', 'data/y.txt']);
  t.deepEqual(await files(berth, other.bucketId), ['data/x.txt']);
});
