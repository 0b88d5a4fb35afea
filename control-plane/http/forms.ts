// What the browser-facing POSTs of the control plane and of site hosts (sign-in, sign-out) share:
// refusing a request made by a page of another site, and reading a small form.
import type Koa from 'koa';
import { BerthError } from '../errors.ts';
import type { Deps } from '../deps.ts';
import { readBody } from './read-body.ts';

/** A POST from a page of another site is refused: browsers always say where a cross-site POST comes from. */
export function sameOrigin(ctx: Koa.Context): void {
  const origin = ctx.get('Origin');
  if (origin && origin !== `${ctx.protocol}://${ctx.host}`)
    throw new BerthError('forbidden', 'a request from another site cannot sign in or out here');
}

/** A urlencoded form, or a JSON object of strings. */
export async function readForm(ctx: Koa.Context, deps: Pick<Deps, 'config'>): Promise<Record<string, string>> {
  const raw = (
    await readBody(ctx, deps.config.maxJsonBytes, () => new BerthError('payload_too_large', 'the form is too large'))
  ).toString('utf8');
  if (ctx.is('application/json')) {
    try {
      const value = JSON.parse(raw) as unknown;
      if (value !== null && typeof value === 'object')
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, typeof v === 'string' ? v : '']));
    } catch {
      // Reported below, as for any body that is not a form.
    }
    throw new BerthError('invalid_json', 'the request body is not a JSON object');
  }
  return Object.fromEntries(new URLSearchParams(raw));
}
