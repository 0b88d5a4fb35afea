// The sandbox's command line, read without spawning anything.
import test from 'ava';
import { denoArgs, denoEnv } from '../runtime-host/deno-args.ts';
import { entryProgram } from '../runtime-host/function-files.ts';

const args = denoArgs({
  socketPath: '/data/runtime/sockets/w.sock',
  heapMb: 96,
  egressAddress: '127.0.0.1:41234',
});

test('workers may connect to the egress proxy, their own socket and their own path to their database, nothing else', (t) => {
  const flags = args.filter((a) => a.startsWith('--allow') || a.startsWith('--deny'));
  t.deepEqual(flags, [
    '--allow-net=127.0.0.1:41234,unix:/data/runtime/sockets/w.sock,unix:/data/runtime/sockets/w.sock.db',
    '--allow-read=/data/runtime/sockets/w.sock,/data/runtime/sockets/w.sock.db',
    '--allow-write=/data/runtime/sockets/w.sock,/data/runtime/sockets/w.sock.db',
  ]);
  for (const forbidden of [
    '--allow-all',
    '-A',
    '--allow-env',
    '--allow-run',
    '--allow-ffi',
    '--allow-sys',
    '--allow-import',
  ]) {
    t.false(
      args.some((a) => a.startsWith(forbidden)),
      forbidden,
    );
  }
  for (const flag of ['--no-config', '--no-prompt', '--no-remote', '--no-npm']) t.true(args.includes(flag), flag);
  t.true(args.includes('--v8-flags=--max-old-space-size=96,--max-semi-space-size=4'));
  t.is(args.at(-1), '-', 'the program comes on stdin: no path, site or socket among the script arguments');
});

test('the entry program connects before it imports the function, by a literal specifier', (t) => {
  const program = entryProgram('/data/runtime/functions/f/v/function.ts', {
    socketPath: '/data/runtime/sockets/w.sock',
    siteId: 'site-1',
    kind: 'cron',
    sourcePath: 'cron/digest.ts',
    egress: { url: 'http://127.0.0.1:41234', token: 't' },
  });
  const lines = program.trim().split('\n');
  t.regex(lines[0]!, /^import \{ connect, run \} from "file:\/\/\/.+\/deno-shim\/shim\.ts";$/);
  t.is(
    lines[1],
    'const channel = await connect({"socketPath":"/data/runtime/sockets/w.sock","siteId":"site-1","kind":"cron","sourcePath":"cron/digest.ts","egress":{"url":"http://127.0.0.1:41234","token":"t"},"functionUrl":"file:///data/runtime/functions/f/v/function.ts"});',
  );
  t.is(lines[2], 'await run(channel, () => import("file:///data/runtime/functions/f/v/function.ts"));');
});

test('workers start with an empty environment', (t) => {
  t.deepEqual(denoEnv('/data/runtime/deno-dir'), {
    DENO_DIR: '/data/runtime/deno-dir',
    DENO_NO_UPDATE_CHECK: '1',
    NO_COLOR: '1',
  });
});
