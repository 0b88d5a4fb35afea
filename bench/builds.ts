// Functions that import, measured: the time a deployment of a Hono + zod function takes to publish with
// an empty package cache and with a warm one (a changed function, the packages cached), the size of its
// built module, and what serving it costs beside a plain v0 hello on the same server: requests per
// second under the same load at the same time, and the first request after each is deployed again (a
// new version: a spare takes it). The registry is Verdaccio with the real hono and zod in it, on the
// load core; the server is on its own core.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import got, { type Got } from 'got';
import { LOAD_CORE, pinSelf, runLoad, startServe, stopAll } from './harness.ts';
import { REAL_PACKAGES, publishRealPackages, startNpmRegistry } from '../test/helpers/npm-registry.ts';

const COLD_STARTS = 5;

const PLAIN = 'export default () => new Response("hello");\n';
const hono = (label: string) =>
  [
    "import { Hono } from 'hono';",
    "import { z } from 'zod';",
    'const Query = z.object({ name: z.string().default("world") });',
    'const app = new Hono();',
    `app.get('/api/hono', (c) => c.text('hello ' + Query.parse(c.req.query()).name + '${label}'));`,
    'export default app.fetch;',
    '',
  ].join('\n');

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, performance.now() - started];
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main() {
  pinSelf(LOAD_CORE);
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-builds-'));
  const registry = await startNpmRegistry();
  try {
    await publishRealPackages(registry);
    const serving = await startServe('berth serve', work, {
      BERTH_NPM_REGISTRY: registry.url,
      BERTH_NPM_MIN_AGE_MINUTES: '0',
    });
    const { port, dataDir, accountId } = serving;
    const api = serving.api.extend({ timeout: { request: 600_000 } });
    const site = await api
      .post('v0/sites', { json: { accountId, name: 'builds' } })
      .json<{ id: string; subdomain: string }>();
    const host = `${site.subdomain}.localhost`;
    const deploy = (files: Record<string, string>) => publish(api, site.id, files);
    const config = JSON.stringify({
      imports: { hono: `npm:hono@^${REAL_PACKAGES.hono}`, zod: `npm:zod@^${REAL_PACKAGES.zod}` },
    });

    const [, coldMs] = await timed(() =>
      deploy({ 'deno.json': config, 'api/hono.ts': hono(''), 'api/plain.ts': PLAIN }),
    );
    const [, warmMs] = await timed(() => deploy({ 'api/hono.ts': hono('!') }));
    const builtBytes = await builtModuleBytes(dataDir);

    const get = (name: string) =>
      got.get(`http://127.0.0.1:${port}/api/${name}`, { headers: { host }, retry: { limit: 0 } }).text();
    const firstRequest = async (name: string, redeploy: (n: number) => Record<string, string>) => {
      const times: number[] = [];
      for (let n = 0; n < COLD_STARTS; n++) {
        await deploy(redeploy(n));
        times.push((await timed(() => get(name)))[1]);
      }
      return median(times);
    };
    const plainColdMs = await firstRequest('plain', (n) => ({ 'api/plain.ts': `${PLAIN}// ${n}\n` }));
    const honoColdMs = await firstRequest('hono', (n) => ({ 'api/hono.ts': hono(` ${n}`) }));

    const origin = `http://127.0.0.1:${port}`;
    const report = await runLoad({
      targets: [
        { label: 'plain', origin, path: '/api/plain', connections: 16, headers: { host } },
        { label: 'hono', origin, path: '/api/hono?name=bench', connections: 16, headers: { host } },
      ],
      seconds: 10,
      warmupSeconds: 2,
    });
    const rps = (label: string) => report.results.find((r) => r.label === label)!.rps;

    console.log('\nFunctions that import (Hono + zod) beside a plain v0 hello, on one server');
    console.log('| measure | value | aim |');
    console.log('|---|---:|---|');
    console.log(
      `| deploy, package cache empty (hono ${REAL_PACKAGES.hono}, zod ${REAL_PACKAGES.zod} from the registry) | ${coldMs.toFixed(0)} ms | |`,
    );
    console.log(
      `| deploy of a changed function, packages cached | ${warmMs.toFixed(0)} ms | under 2,000 ms: ${warmMs < 2000 ? 'met' : 'not met'} |`,
    );
    console.log(`| built module | ${(builtBytes / 1024).toFixed(1)} KiB | |`);
    console.log(
      `| req/s, Hono ÷ plain (16 connections each, at once) | ${rps('hono').toFixed(0)} ÷ ${rps('plain').toFixed(0)} = ${(rps('hono') / rps('plain')).toFixed(2)} | at least 0.9: ${rps('hono') / rps('plain') >= 0.9 ? 'met' : 'not met'} |`,
    );
    console.log(
      `| first request after a deploy, Hono ÷ plain (median of ${COLD_STARTS}) | ${honoColdMs.toFixed(1)} ms ÷ ${plainColdMs.toFixed(1)} ms = ${(honoColdMs / plainColdMs).toFixed(2)} | |`,
    );
  } finally {
    await stopAll();
    await registry.stop();
    await fs.rm(work, { recursive: true, force: true });
  }
}

/** Declares inline files, publishes them, and fails loudly unless the deployment was published. */
async function publish(api: Got, siteId: string, files: Record<string, string>): Promise<void> {
  const { deployment } = await api
    .post(`v0/sites/${siteId}/deployments`, {
      json: {
        files: Object.entries(files).map(([path, content]) => ({
          path,
          content,
          contentType: path.endsWith('.json') ? 'application/json' : 'text/typescript',
        })),
      },
    })
    .json<{ deployment: { id: string } }>();
  const published = await api.post(`v0/sites/${siteId}/deployments/${deployment.id}/publish`, {
    throwHttpErrors: false,
  });
  if (published.statusCode !== 200) throw new Error(`publish: ${published.statusCode} ${published.body}`);
}

/** The largest built module the server wrote for its workers. */
async function builtModuleBytes(dataDir: string): Promise<number> {
  let largest = 0;
  for (const entry of await fs.readdir(path.join(dataDir, 'runtime', 'functions'), { recursive: true })) {
    if (!entry.endsWith('function.js')) continue;
    largest = Math.max(largest, (await fs.stat(path.join(dataDir, 'runtime', 'functions', entry))).size);
  }
  return largest;
}

await main();
