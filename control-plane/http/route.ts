// A route is data. Most routes bind an operation of the catalogue (operations/) to a method and a path:
// the operation's input is gathered from the path parameters and the query (GET) or JSON body, and
// validated once with the operation's own schema. A few routes that move raw bytes have a handler of
// their own. mountRoutes binds both kinds to a Koa router; openapi.ts documents the same list.
import type http from 'node:http';
import type Koa from 'koa';
import type Router from '@koa/router';
import type { z } from 'zod';
import { BerthError } from '../errors.ts';
import { type Operation, authorize, invalidInput, parseInput } from '../operations/operation.ts';
import type { Actor, Deps } from '../deps.ts';
import { readJsonBody } from './json-body.ts';
import { publicOrigin } from './proxy.ts';
import type { NextStep } from '../services/next-step.ts';

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

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** An operation served at a method and path. */
export interface OperationRoute {
  operation: Operation;
  method: Method;
  /** Koa router path; its `:name` parameters are fields of the operation's input. */
  path: string;
  operationId: string;
  tag: string;
  /** Where the rest of the input comes from; GET reads the query, anything else the JSON body. */
  inputFrom?: 'query' | 'body';
  /** The largest JSON body the route reads, where its input is larger by nature than the default allows. */
  maxJsonBytes?: number;
  /** Success status, or a function of the output for operations whose outcome decides it. */
  // biome-ignore lint/suspicious/noExplicitAny: a route's output is its operation's, whatever that is
  status?: number | ((output: any) => number);
  /** Description of the success response; its schema is the operation's output. */
  ok: string;
  /** Documented failures beside the ones every route has. */
  errors?: Record<number, RouteResponse>;
  /** Response headers set on success. */
  headers?: Record<string, string>;
  /** Renders the output for REST where only the front door knows what to add: links at `origin`, where people reach Berth… */
  // biome-ignore lint/suspicious/noExplicitAny: as status above
  present?: (output: any, origin: string) => unknown;
  /** …and the schema of what it renders, for the OpenAPI document. */
  presents?: z.ZodType;
}

/** A route that reads or writes raw bytes itself. */
export interface Route<P = unknown, Q = unknown, B = unknown> {
  method: Method;
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

export type AnyRoute = Route | OperationRoute;

export const isOperationRoute = (route: AnyRoute): route is OperationRoute => 'operation' in route;

/** Keeps a route's handler typed by its schemas while the list stays homogeneous. */
export function defineRoute<P = Record<string, never>, Q = Record<string, never>, B = undefined>(
  route: Route<P, Q, B>,
): Route {
  return route as unknown as Route;
}

/**
 * Runs a handler that reads the raw request body itself. A refused body's rest is not read, so the
 * connection is closed after the answer rather than reused with unread bytes on it.
 */
export async function readingRawBody<T>(ctx: Koa.Context, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!ctx.req.readableEnded) ctx.set('Connection', 'close');
    throw err;
  }
}

/** The parameters of a route path: `:name`, and `{*name}` for a bucket file path. */
export const pathParameters = (path: string): string[] =>
  [...path.matchAll(/:(\w+)|\{\*(\w+)\}/g)].map((m) => (m[1] ?? m[2])!);

export const inputSource = (route: OperationRoute): 'query' | 'body' =>
  route.inputFrom ?? (route.method === 'GET' ? 'query' : 'body');

/**
 * The request that runs `route`'s operation with `input`: the path with its parameters filled in
 * (`encode`d: `{*name}` keeps its slashes), and the rest of the input for the query or body.
 */
export function requestFor(
  route: OperationRoute,
  input: Record<string, unknown>,
  encode = (text: string) => text,
): { path: string; rest: Record<string, unknown> } {
  const inPath = pathParameters(route.path);
  const path = route.path.replace(/:(\w+)|\{\*(\w+)\}/g, (_, name: string | undefined, rest: string | undefined) => {
    const value = String(input[(name ?? rest)!] ?? '');
    return rest ? value.split('/').map(encode).join('/') : encode(value);
  });
  return { path, rest: Object.fromEntries(Object.entries(input).filter(([key]) => !inPath.includes(key))) };
}

function parse<T>(schema: z.ZodType<T> | undefined, value: unknown, where: 'path' | 'query' | 'body'): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (!result.success) throw invalidInput(result.error, () => where);
  return result.data;
}

/** Query strings may repeat a key; only single values are meaningful here. */
function singleValuedQuery(ctx: Koa.Context): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(ctx.query)) {
    if (Array.isArray(value)) throw new BerthError('invalid_request', `query parameter "${key}" must be given once`);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/**
 * What an operation route reads of its request, whichever way it came: through Koa's router, or the
 * lean API path (lean-api.ts).
 */
export interface OperationRequest {
  req: http.IncomingMessage;
  /** The path parameters, decoded. */
  params: Record<string, string | undefined>;
  /** The query string, each key once (asked only of a route that reads the query). */
  query(): Record<string, string>;
  /** Where people reach Berth, for the links `present` makes. */
  origin(): string;
}

/** An operation route's answer: its status, the headers it adds and the JSON body. */
export interface OperationAnswer {
  status: number;
  headers: Record<string, string> | undefined;
  body: unknown;
}

/** The operation's input from the request: path parameters win, and may not be sent twice. */
async function operationInput(route: OperationRoute, request: OperationRequest, deps: Deps): Promise<unknown> {
  const source = inputSource(route);
  const rest =
    source === 'query' ? request.query() : await readJsonBody(request, route.maxJsonBytes ?? deps.config.maxJsonBytes);
  if (rest === null || typeof rest !== 'object' || Array.isArray(rest))
    throw new BerthError('invalid_request', 'body: the JSON body must be an object');
  const params = pathParameters(route.path);
  const repeated = params.filter((name) => Object.hasOwn(rest, name));
  if (repeated.length > 0)
    throw new BerthError('invalid_request', `${source}: unknown field(s): ${repeated.join(', ')}`);
  const raw = { ...rest, ...Object.fromEntries(params.map((name) => [name, request.params[name]])) };
  return parseInput(route.operation, raw, (field) => (params.includes(field) ? 'path' : source));
}

// REST's rendering of a next step (services/next-step.ts): the route that serves its operation, as
// `METHOD /path` with the path filled in, then the rest of the input as a query string or JSON body.
export type NextCommand = (step: NextStep) => string;

export function nextCommands(routes: AnyRoute[]): NextCommand {
  const byOperation = new Map<string, OperationRoute>();
  for (const route of routes) if (isOperationRoute(route)) byOperation.set(route.operation.name, route);
  return (step) => {
    const route = byOperation.get(step.operation);
    if (!route) throw new Error(`no REST route serves ${step.operation}`);
    const { path, rest: others } = requestFor(route, step.input);
    if (Object.keys(others).length === 0) return `${route.method} ${path}`;
    return inputSource(route) === 'query'
      ? `${route.method} ${path}?${new URLSearchParams(others as Record<string, string>)}`
      : `${route.method} ${path} ${JSON.stringify(others)}`;
  };
}

/** `value` with its `next` step, if any, rendered as `nextCommand` in its place. */
export function withNextCommand<T>(value: T, render: NextCommand): T {
  if (value === null || typeof value !== 'object' || !('next' in value)) return value;
  const { next, ...rest } = value as { next: NextStep };
  return { ...rest, nextCommand: render(next) } as T;
}

/** Runs an operation route for `actor`, who has been authenticated: authorized, input read and validated, run, rendered. */
export async function answerOperation(
  route: OperationRoute,
  deps: Deps,
  render: NextCommand,
  actor: Actor,
  request: OperationRequest,
): Promise<OperationAnswer> {
  authorize(route.operation, actor);
  const input = await operationInput(route, request, deps);
  let output: unknown;
  try {
    output = await route.operation.run(deps, actor, input);
  } catch (err) {
    // A failure's next step (details.next) is rendered like a success's.
    if (err instanceof BerthError && err.details)
      throw new BerthError(err.code, err.message, withNextCommand(err.details, render), err.records);
    throw err;
  }
  const body = withNextCommand(output, render);
  return {
    status: typeof route.status === 'function' ? route.status(output) : (route.status ?? 200),
    headers: route.headers,
    body: route.present ? route.present(body, request.origin()) : body,
  };
}

export function mountRoutes(router: Router, routes: AnyRoute[], deps: Deps): void {
  const render = nextCommands(routes);
  for (const route of routes) {
    const handler: Koa.Middleware = isOperationRoute(route)
      ? async (ctx) => {
          const answer = await answerOperation(route, deps, render, ctx.state.actor as Actor, {
            req: ctx.req,
            params: ctx.params,
            query: () => singleValuedQuery(ctx),
            origin: () => publicOrigin(ctx, deps.config),
          });
          ctx.status = answer.status;
          if (answer.headers) ctx.set(answer.headers);
          ctx.body = answer.body;
        }
      : async (ctx) => {
          const params = parse(route.params as AnyObject | undefined, ctx.params, 'path');
          const query = parse(route.query as AnyObject | undefined, singleValuedQuery(ctx), 'query');
          const body = route.body
            ? parse(route.body, await readJsonBody(ctx, deps.config.maxJsonBytes), 'body')
            : undefined;
          const result = await route.handler({ params, query, body, actor: ctx.state.actor as Actor, deps, ctx });
          if (result !== undefined) {
            ctx.status = route.status ?? 200;
            ctx.body = result;
          }
        };
    router.register(route.path, [route.method], handler);
  }
}
