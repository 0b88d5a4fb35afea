// A route is data: method, path, the zod schemas of its input, its documented responses and one
// handler. mountRoutes binds them to a Koa router with validation; openapi.ts documents the same list.
import type Koa from 'koa';
import type Router from '@koa/router';
import { z } from 'zod';
import { BerthError } from '../errors.ts';
import type { Actor, Deps } from '../services/deps.ts';
import { readJsonBody } from './json-body.ts';

type AnyObject = z.ZodType<Record<string, unknown>>;

export interface RouteResponse {
  description: string;
  schema?: z.ZodType;
  /** Non-JSON bodies such as raw file bytes. */
  contentType?: string;
}

export interface RouteInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  actor: Actor;
  deps: Deps;
  ctx: Koa.Context;
}

export interface Route<P = unknown, Q = unknown, B = unknown> {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Koa router path; `{*path}` captures a bucket file path. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** A raw (non-JSON) request body, documented but read by the handler itself. */
  rawBody?: { contentType: string; description: string };
  /** Extra documented request headers. */
  headers?: Record<string, string>;
  status?: number;
  responses: Record<number, RouteResponse>;
  /** Returns the JSON body, or undefined when it wrote the response itself. */
  handler: (input: RouteInput<P, Q, B>) => Promise<unknown>;
}

/** Keeps a route's handler typed by its schemas while the list stays homogeneous. */
export function defineRoute<P = Record<string, never>, Q = Record<string, never>, B = undefined>(route: Route<P, Q, B>): Route {
  return route as unknown as Route;
}

/** One 400 for all of an input's problems; the message names the first, details list them all. */
function describeIssues(where: 'path' | 'query' | 'body', error: z.ZodError): BerthError {
  const issues = error.issues.map((issue) => ({
    field: issue.path.map(String).join('.'),
    message: issue.code === 'unrecognized_keys' ? `unknown field(s): ${issue.keys.join(', ')}` : issue.message,
  }));
  const first = issues[0]!;
  const subject = first.field ? `${where} field "${first.field}"` : where;
  return new BerthError('invalid_request', 400, `${subject}: ${first.message}`, { issues });
}

function parse<T>(schema: z.ZodType<T> | undefined, value: unknown, where: 'path' | 'query' | 'body'): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (!result.success) throw describeIssues(where, result.error);
  return result.data;
}

/** Query strings may repeat a key; only single values are meaningful here. */
function singleValuedQuery(ctx: Koa.Context): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(ctx.query)) {
    if (Array.isArray(value)) throw new BerthError('invalid_request', 400, `query parameter "${key}" must be given once`);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

export function mountRoutes(router: Router, routes: Route[], deps: Deps): void {
  for (const route of routes) {
    const handler: Koa.Middleware = async (ctx) => {
      const params = parse(route.params as AnyObject | undefined, ctx.params, 'path');
      const query = parse(route.query as AnyObject | undefined, singleValuedQuery(ctx), 'query');
      const body = route.body ? parse(route.body, await readJsonBody(ctx, deps.config.maxJsonBytes), 'body') : undefined;
      const result = await route.handler({ params, query, body, actor: ctx.state.actor as Actor, deps, ctx });
      if (result !== undefined) {
        ctx.status = route.status ?? 200;
        ctx.body = result;
      }
    };
    router.register(route.path, [route.method], handler);
  }
}
