// The dashboard at / of the control-plane host: a single-page app in control-plane/dashboard/, bundled
// by esbuild in memory on first use (no build step, nothing written to disk) and served with
// a strict Content-Security-Policy. It talks to /v0 with the session cookie like any API client.
// GET / answers the page only to a browser (one that prefers HTML); API clients keep getting the JSON
// service description.
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import fs from 'node:fs/promises';
import path from 'node:path';
import Router from '@koa/router';
import * as esbuild from 'esbuild';
import type Koa from 'koa';
import type { Deps } from '../deps.ts';

const SOURCE = path.resolve(import.meta.dirname, '../dashboard');
/** The chart library's stylesheet, served in the dashboard's one stylesheet, before its own rules. */
const CHART_CSS = createRequire(import.meta.url).resolve('uplot/dist/uPlot.min.css');

/** Everything comes from this instance: scripts and styles from files, requests to the same origin. */
export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

interface Asset {
  body: string;
  type: string;
  etag: string;
}

interface Assets {
  html: Asset;
  js: Asset;
  css: Asset;
}

const asset = (body: string, type: string): Asset => ({
  body,
  type,
  etag: `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
});

/** Bundles the app (TypeScript and the chart library to one script) and reads its page and stylesheets. */
export async function buildDashboard(): Promise<Assets> {
  const [bundle, html, css, chartCss] = await Promise.all([
    esbuild.build({
      entryPoints: [path.join(SOURCE, 'main.ts')],
      bundle: true,
      write: false,
      format: 'iife',
      target: 'es2022',
      minify: true,
      legalComments: 'none',
      logLevel: 'silent',
      tsconfig: path.join(SOURCE, 'tsconfig.json'),
    }),
    fs.readFile(path.join(SOURCE, 'index.html'), 'utf8'),
    fs.readFile(path.join(SOURCE, 'dashboard.css'), 'utf8'),
    fs.readFile(CHART_CSS, 'utf8'),
  ]);
  const js = bundle.outputFiles[0]!.text;
  return {
    html: asset(html, 'text/html; charset=utf-8'),
    js: asset(js, 'text/javascript; charset=utf-8'),
    css: asset(`${chartCss}\n${css}`, 'text/css; charset=utf-8'),
  };
}

function send(ctx: Koa.Context, item: Asset, cache: string): void {
  ctx.set({
    'Content-Security-Policy': DASHBOARD_CSP,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': cache,
    ETag: item.etag,
  });
  ctx.type = item.type;
  ctx.status = 200;
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  ctx.body = item.body;
}

/**
 * The dashboard's routes. The bundle is built once, when a browser first asks for the dashboard, so a
 * server nobody opens it on never pays for it; a build failure is logged and answers 500 on the
 * dashboard's URLs while the API goes on working.
 */
export function dashboardRoutes(deps: Pick<Deps, 'log'>): Router {
  let built: Promise<Assets> | undefined;
  // A rejected build reaches the error envelope as an internal error (500), logged here once.
  const assets = (): Promise<Assets> =>
    (built ??= buildDashboard().catch((err: unknown) => {
      deps.log.error({ err }, 'the dashboard could not be built');
      throw err;
    }));

  const router = new Router();
  router.get('/', async (ctx, next) => {
    if (ctx.accepts('json', 'html') !== 'html') return next();
    send(ctx, (await assets()).html, 'no-cache');
  });
  router.get('/dashboard/app.js', async (ctx) => send(ctx, (await assets()).js, 'no-cache'));
  router.get('/dashboard/app.css', async (ctx) => send(ctx, (await assets()).css, 'no-cache'));
  return router;
}
