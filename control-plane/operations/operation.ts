// An operation is one thing Berth can do, defined once for every front door: REST routes and the
// OpenAPI document, MCP tools and CLI commands are all generated from the catalogue of operations
// (operations/index.ts). An operation knows nothing of HTTP: it takes its whole input as one validated
// object and returns data.
import { z } from 'zod';
import { BerthError } from '../errors.ts';
import type { Actor, Deps, Permission } from '../deps.ts';

// biome-ignore lint/suspicious/noExplicitAny: the catalogue lists operations of every input and output type together
export interface Operation<I = any, O = any> {
  /** snake_case; the spec's MCP tool name where it has one, e.g. `create_site`. */
  name: string;
  /** One line, shown as the MCP tool's description, the CLI command's help and the OpenAPI summary. */
  description: string;
  /** READ operations change nothing and are all a READ key may run. */
  permission: Permission;
  /** Removes or overwrites something that cannot be had back by another call. */
  destructive?: boolean;
  /**
   * `users`: only a signed-in user may run it (managing keys and members, approving a CLI login: the
   * spec keeps these out of the API-key contract). `admins`: a signed-in MEMBER may not (API keys
   * stand for the account's administrators).
   */
  audience?: 'users' | 'admins' | 'user-admins';
  /** The whole input, an object: path parameters, query and body in REST terms. */
  input: z.ZodType<I>;
  output: z.ZodType<O>;
  run: (deps: Deps, actor: Actor, input: I) => Promise<O>;
}

/** Keeps `run` typed by the schemas while the catalogue stays one homogeneous list. */
export function defineOperation<I, O>(operation: Operation<I, O>): Operation<I, O> {
  return operation;
}

export const isReadOnly = (operation: Operation): boolean => operation.permission === 'READ';

/** Whether `actor` may run `operation` at all; every front door asks before it reads the input. */
export function authorize(operation: Operation, actor: Actor): void {
  if (operation.permission === 'WRITE' && actor.permission !== 'WRITE') {
    throw new BerthError('forbidden', `this credential is read-only; ${operation.name} needs WRITE`);
  }
  const audience = operation.audience;
  if ((audience === 'users' || audience === 'user-admins') && actor.via !== 'session') {
    throw new BerthError('forbidden', `${operation.name} needs a signed-in user: use the dashboard`);
  }
  if ((audience === 'admins' || audience === 'user-admins') && actor.user && actor.user.role !== 'ADMIN') {
    throw new BerthError(
      'forbidden',
      `${operation.name} is for the account's administrators; your role is ${actor.user.role}`,
    );
  }
}

/** Whether `actor` may run `operation`, for listing what a front door offers. */
export function allows(operation: Operation, actor: Actor): boolean {
  try {
    authorize(operation, actor);
    return true;
  } catch {
    return false;
  }
}

/**
 * An operation's input from path parameters and a body: one strict object, so a field the operation
 * does not know is refused wherever it was sent.
 */
export function withParams<P extends z.ZodRawShape, B extends z.ZodRawShape>(
  params: z.ZodObject<P>,
  body: z.ZodObject<B>,
) {
  return z.object({ ...params.shape, ...body.shape }).strict();
}

/**
 * One 400 `invalid_request` for all of an input's problems: the message names the first, and where it
 * was sent when the front door says (REST: path, query or body); details list them all.
 */
export function invalidInput(
  error: z.ZodError,
  placeOf: (field: string) => string | undefined = () => undefined,
): BerthError {
  const issues = error.issues.map((issue) => ({
    field: issue.path.map(String).join('.'),
    message: issue.code === 'unrecognized_keys' ? `unknown field(s): ${issue.keys.join(', ')}` : issue.message,
  }));
  const first = issues[0]!;
  const place = placeOf(first.field.split('.')[0]!);
  const subject = first.field ? `${place ? `${place} field` : 'field'} "${first.field}"` : (place ?? 'input');
  return new BerthError('invalid_request', `${subject}: ${first.message}`, { issues });
}

/** The operation's input, validated; anything else is an `invalid_request`. */
export function parseInput<I>(
  operation: Operation<I>,
  raw: unknown,
  placeOf?: (field: string) => string | undefined,
): I {
  const parsed = operation.input.safeParse(raw);
  if (!parsed.success) throw invalidInput(parsed.error, placeOf);
  return parsed.data;
}
