// REST's rendering of a next step (services/next-step.ts): the route that serves its operation, as
// `METHOD /path` with the path filled in, then the rest of the input as a query string or JSON body.
import type { NextStep } from '../services/next-step.ts';
import { type AnyRoute, type OperationRoute, inputSource, isOperationRoute, requestFor } from './route.ts';

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
