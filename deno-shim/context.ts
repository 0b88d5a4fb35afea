// The `ctx` object handed to functions, of the type the runtime contract publishes (BerthContext).
// Every call travels over the worker's channel to the host, which serves it for this worker's site
// only; the host, not this proxy, decides which methods exist, so a method outside the contract gets
// the stable CTX_UNKNOWN_METHOD error rather than a TypeError.
import type { BerthContext } from '../runtime-host/context-contract.ts';
import type { CtxResult } from '../runtime-host/protocol.ts';

export type CallHost = (method: string, args: unknown[]) => Promise<CtxResult>;

/** The error a failed ctx call throws inside the function: a stable code, a message, maybe a status. */
export class BerthContextError extends Error {
  readonly code: string;
  readonly status?: number;

  constructor(code: string, message: string, status?: number) {
    super(message);
    this.name = 'BerthContextError';
    this.code = code;
    if (status !== undefined) this.status = status;
  }
}

function namespace(prefix: string, callHost: CallHost): Record<string, (...args: unknown[]) => Promise<unknown>> {
  return new Proxy(
    {},
    {
      get(_target, property) {
        // Not a thenable, and no symbol lookups, so `await ctx.data` and inspection behave.
        if (typeof property !== 'string' || property === 'then') return undefined;
        return async (...args: unknown[]) => {
          const result = await callHost(`${prefix}.${property}`, args);
          if (result.ok) return result.value;
          throw new BerthContextError(result.error.code, result.error.message, result.error.status);
        };
      },
    },
  );
}

export function createContext(siteId: string, callHost: CallHost): BerthContext {
  return Object.freeze({
    siteId,
    data: namespace('data', callHost),
    db: namespace('db', callHost),
    secrets: namespace('secrets', callHost),
    llm: Object.freeze({ messages: namespace('llm.messages', callHost) }),
  }) as unknown as BerthContext;
}
