// Routing rules, measured: a site whose web/_redirects holds 2,000 rules and web/_headers 1,000 answers a
// static file beside a site with no rules, on one server under the same load at the same time, so what
// the rules cost per request shows as the ratio of their requests per second. The file's path matches
// rules of both files (a header rule sets its Cache-Control), as a real site's assets would.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Got } from 'got';
import { LOAD_CORE, pinSelf, runLoad, startServe, stopAll } from './harness.ts';

const PAGE = `<!doctype html><title>bench</title>${'<p>routing</p>'.repeat(40)}`;

/** 2,000 redirect rules of the shapes sites write: old pages, sections with splats, placeholders. */
const REDIRECTS = Array.from({ length: 2000 }, (_, i) =>
  i % 3 === 0
    ? `/old/page-${i}  /new/page-${i}  301`
    : i % 3 === 1
      ? `/section-${i}/*  /moved-${i}/:splat  302`
      : `/posts/${i}/:slug  /blog/${i}/:slug`,
).join('\n');

/** 1,000 header rules, one of which matches the file. */
const HEADERS = [
  '/assets/*\n  Cache-Control: public, max-age=31536000, immutable',
  ...Array.from({ length: 999 }, (_, i) => `/area-${i}/*\n  X-Area: ${i}`),
].join('\n');

async function main() {
  pinSelf(LOAD_CORE);
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-routing-'));
  try {
    const serving = await startServe('berth serve', work, {});
    const { port, accountId, api } = serving;
    const plain = await siteWith(api, accountId, 'plain', { 'web/assets/page.html': PAGE });
    const ruled = await siteWith(api, accountId, 'ruled', {
      'web/assets/page.html': PAGE,
      'web/_redirects': REDIRECTS,
      'web/_headers': HEADERS,
    });
    const origin = `http://127.0.0.1:${port}`;
    const report = await runLoad({
      targets: [
        { label: 'none', origin, path: '/assets/page.html', connections: 16, headers: { host: `${plain}.localhost` } },
        { label: 'rules', origin, path: '/assets/page.html', connections: 16, headers: { host: `${ruled}.localhost` } },
      ],
      seconds: 10,
      warmupSeconds: 2,
    });
    const rps = (label: string) => report.results.find((r) => r.label === label)!.rps;
    const ratio = rps('rules') / rps('none');
    console.log(
      '\nRouting rules: a static file of a site with 2,000 redirect and 1,000 header rules beside one with none',
    );
    console.log('| measure | value | aim |');
    console.log('|---|---:|---|');
    console.log(
      `| req/s, rules ÷ none (16 connections each, at once) | ${rps('rules').toFixed(0)} ÷ ${rps('none').toFixed(0)} = ${ratio.toFixed(2)} | at least 0.9: ${ratio >= 0.9 ? 'met' : 'not met'} |`,
    );
  } finally {
    await stopAll();
    await fs.rm(work, { recursive: true, force: true });
  }
}

/** A site with `files`, published in one deployment; its subdomain. */
async function siteWith(api: Got, accountId: string, name: string, files: Record<string, string>): Promise<string> {
  const site = await api.post('v0/sites', { json: { accountId, name } }).json<{ id: string; subdomain: string }>();
  const { deployment } = await api
    .post(`v0/sites/${site.id}/deployments`, {
      json: {
        files: Object.entries(files).map(([path, content]) => ({
          path,
          content,
          contentType: path.endsWith('.html') ? 'text/html' : 'text/plain',
        })),
      },
    })
    .json<{ deployment: { id: string } }>();
  const published = await api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`, {
    throwHttpErrors: false,
  });
  if (published.statusCode !== 200) throw new Error(`publish: ${published.statusCode} ${published.body}`);
  return site.subdomain;
}

await main();
