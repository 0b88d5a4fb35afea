// The sandbox's command line, read without spawning anything.
import test from 'ava';
import { DENIED_NETWORKS, denoArgs, denoEnv, localAddresses } from '../runtime-host/deno-args.ts';
import { entryProgram } from '../runtime-host/deployments.ts';

const args = denoArgs({
  socketPath: '/data/runtime/sockets/w.sock',
  heapMb: 96,
  extraDenied: ['203.0.113.7', '[2001:db8::1]', '127.0.0.1'],
});

test('workers get outbound network and their own socket, nothing else', (t) => {
  const flags = args.filter((a) => a.startsWith('--allow'));
  t.deepEqual(flags, ['--allow-net', '--allow-read=/data/runtime/sockets/w.sock', '--allow-write=/data/runtime/sockets/w.sock']);
  for (const forbidden of ['--allow-all', '-A', '--allow-env', '--allow-run', '--allow-ffi', '--allow-sys', '--allow-import']) {
    t.false(args.some((a) => a.startsWith(forbidden)), forbidden);
  }
  for (const flag of ['--no-config', '--no-prompt', '--no-remote', '--no-npm']) t.true(args.includes(flag), flag);
  t.true(args.includes('--v8-flags=--max-old-space-size=96,--max-semi-space-size=4'));
  t.is(args.at(-1), '-', 'the program comes on stdin: no path, site or socket among the script arguments');
});

test('the entry program connects before it imports the function, by a literal specifier', (t) => {
  const program = entryProgram('/data/runtime/functions/f/v/function.ts', { socketPath: '/data/runtime/sockets/w.sock', siteId: 'site-1', kind: 'cron', sourcePath: 'cron/digest.ts' });
  const lines = program.trim().split('\n');
  t.regex(lines[0]!, /^import \{ connect, run \} from "file:\/\/\/.+\/deno-shim\/shim\.ts";$/);
  t.is(
    lines[1],
    'const channel = await connect({"socketPath":"/data/runtime/sockets/w.sock","siteId":"site-1","kind":"cron","sourcePath":"cron/digest.ts","functionUrl":"file:///data/runtime/functions/f/v/function.ts"});',
  );
  t.is(lines[2], 'await run(channel, () => import("file:///data/runtime/functions/f/v/function.ts"));');
});

test('private, loopback, link-local and this machine’s own addresses are denied', (t) => {
  const deny = args.find((a) => a.startsWith('--deny-net='))!.slice('--deny-net='.length).split(',');
  for (const network of [...DENIED_NETWORKS, '203.0.113.7', '[2001:db8::1]']) t.true(deny.includes(network), network);
  t.is(deny.filter((d) => d === '127.0.0.1').length, 1, 'no duplicates');
  t.true(deny.includes('169.254.0.0/16'), 'cloud metadata');
  t.true(deny.includes('127.0.0.0/8'));
});

test('interface addresses are written in Deno’s syntax', (t) => {
  t.deepEqual(
    localAddresses({
      lo: [
        { address: '127.0.0.1', family: 'IPv4' },
        { address: '::1', family: 'IPv6' },
      ],
      eth0: [{ address: 'fe80::1%eth0', family: 6 }],
      down: undefined,
    }),
    ['127.0.0.1', '[::1]', '[fe80::1]'],
  );
});

test('workers start with an empty environment', (t) => {
  t.deepEqual(denoEnv('/data/runtime/deno-dir'), { DENO_DIR: '/data/runtime/deno-dir', DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' });
});
