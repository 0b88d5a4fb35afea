// Model calls for functions (ctx.llm.messages.create): Berth's two model names mapped onto the
// provider the operator configured (an OpenAI-compatible chat completions API or Anthropic's Messages
// API). Every call is counted against the account's daily allowance before it is made, so failed calls
// count too. Calls are not retried. The provider key stays on the host; functions never see it.
import got, { HTTPError, TimeoutError } from 'got';
import { z } from 'zod';
import { BerthError } from '../errors.ts';
import type { LlmConfig } from '../config.ts';
import type { Deps } from '../deps.ts';

export const MODELS = ['model-6-luna', 'model-6.1-sol'] as const;
export type ModelName = (typeof MODELS)[number];

const MAX_MESSAGE_CHARS = 32_000;
const MAX_TOTAL_BYTES = 64_000;

const Message = z.object({
  role: z.enum(['system', 'user', 'assistant'], { error: 'role must be system, user or assistant' }),
  content: z
    .string({ error: 'content must be a string' })
    .max(MAX_MESSAGE_CHARS, { error: `a message may hold at most ${MAX_MESSAGE_CHARS} characters` }),
});

export const CreateMessageOptions = z
  .object({
    model: z.enum(MODELS, { error: `model must be ${MODELS.join(' or ')}` }).default('model-6-luna'),
    reasoningEffort: z
      .enum(['none', 'low', 'medium', 'high'], { error: 'reasoningEffort must be none, low, medium or high' })
      .default('low'),
    maxOutputTokens: z
      .number()
      .int()
      .min(16, { error: 'maxOutputTokens must be 16–8192' })
      .max(8192, { error: 'maxOutputTokens must be 16–8192' })
      .default(4096),
    messages: z
      .array(Message)
      .min(1, { error: 'messages must hold 1–100 messages' })
      .max(100, { error: 'messages must hold 1–100 messages' }),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.reasoningEffort === 'none' && o.model !== 'model-6-luna') {
      ctx.addIssue({ code: 'custom', message: 'reasoningEffort "none" is only available with model-6-luna' });
    }
    if (o.messages.slice(1).some((m) => m.role === 'system')) {
      ctx.addIssue({ code: 'custom', message: 'only the first message may have the system role' });
    }
    if (!o.messages.some((m) => m.role === 'user'))
      ctx.addIssue({ code: 'custom', message: 'at least one message must have the user role' });
    const bytes = o.messages.reduce((n, m) => n + Buffer.byteLength(m.content, 'utf8'), 0);
    if (bytes > MAX_TOTAL_BYTES)
      ctx.addIssue({
        code: 'custom',
        message: `all messages together may hold at most ${MAX_TOTAL_BYTES} bytes of UTF-8`,
      });
  });

export type CreateMessage = z.infer<typeof CreateMessageOptions>;

export interface MessageResult {
  id: string;
  model: ModelName;
  message: { content: string };
  usage: { inputTokens: number; outputTokens: number };
}

/** Counts one call for the account today and refuses it past the allowance. */
async function countCall(deps: Deps, accountId: string): Promise<void> {
  const day = deps.now().toISOString().slice(0, 10);
  const calls = await deps.db.transaction(async (trx) => {
    await trx('llm_usage')
      .insert({ account_id: accountId, day, calls: 0, input_tokens: 0, output_tokens: 0 })
      .onConflict(['account_id', 'day'])
      .ignore();
    await trx('llm_usage').where({ account_id: accountId, day }).increment('calls', 1);
    return ((await trx('llm_usage').where({ account_id: accountId, day }).first('calls')) as { calls: number }).calls;
  });
  if (calls > deps.config.llm.dailyCalls) {
    throw new BerthError(
      'llm_usage_exceeded',
      `this account has used its ${deps.config.llm.dailyCalls} model calls for today (UTC); calls resume tomorrow`,
    );
  }
}

/** Today's (UTC) model calls of the account against its allowance; refused calls past it not counted. */
export async function modelCallsToday(
  deps: Deps,
  accountId: string,
): Promise<{ day: string; modelCalls: number; allowance: number }> {
  const day = deps.now().toISOString().slice(0, 10);
  const row = (await deps.db('llm_usage').where({ account_id: accountId, day }).first('calls')) as
    | { calls: number }
    | undefined;
  const allowance = deps.config.llm.dailyCalls;
  return { day, modelCalls: Math.min(row?.calls ?? 0, allowance), allowance };
}

async function recordTokens(deps: Deps, accountId: string, usage: MessageResult['usage']): Promise<void> {
  const day = deps.now().toISOString().slice(0, 10);
  await deps
    .db('llm_usage')
    .where({ account_id: accountId, day })
    .increment({ input_tokens: usage.inputTokens, output_tokens: usage.outputTokens });
}

interface ProviderAnswer {
  id: string;
  content: string;
  usage: MessageResult['usage'];
}

function callOpenAi(config: LlmConfig, model: string, o: CreateMessage): Promise<ProviderAnswer> {
  return got
    .post(`${config.baseUrl.replace(/\/$/, '')}/chat/completions`, {
      headers: config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {},
      json: {
        model,
        messages: o.messages,
        max_tokens: o.maxOutputTokens,
        ...(o.reasoningEffort === 'none' ? {} : { reasoning_effort: o.reasoningEffort }),
      },
      timeout: { request: config.timeoutMs },
      retry: { limit: 0 },
    })
    .json<{
      id?: string;
      choices?: Array<{ message?: { content?: string | null } }>;
      usage?: { prompt_tokens?: number; completion_tokens?: number };
    }>()
    .then((r) => ({
      id: r.id ?? '',
      content: r.choices?.[0]?.message?.content ?? '',
      usage: { inputTokens: r.usage?.prompt_tokens ?? 0, outputTokens: r.usage?.completion_tokens ?? 0 },
    }));
}

function callAnthropic(config: LlmConfig, model: string, o: CreateMessage): Promise<ProviderAnswer> {
  const system = o.messages[0]?.role === 'system' ? o.messages[0].content : undefined;
  return got
    .post(`${config.baseUrl.replace(/\/$/, '')}/v1/messages`, {
      headers: { 'x-api-key': config.apiKey, 'anthropic-version': '2023-06-01' },
      json: {
        model,
        max_tokens: o.maxOutputTokens,
        ...(system === undefined ? {} : { system }),
        messages: o.messages.filter((m) => m.role !== 'system'),
      },
      timeout: { request: config.timeoutMs },
      retry: { limit: 0 },
    })
    .json<{
      id?: string;
      content?: Array<{ type: string; text?: string }>;
      usage?: { input_tokens?: number; output_tokens?: number };
    }>()
    .then((r) => ({
      id: r.id ?? '',
      content: (r.content ?? [])
        .filter((c) => c.type === 'text')
        .map((c) => c.text ?? '')
        .join(''),
      usage: { inputTokens: r.usage?.input_tokens ?? 0, outputTokens: r.usage?.output_tokens ?? 0 },
    }));
}

/** ctx.llm.messages.create for a function of `accountId`'s site. */
export async function createMessage(deps: Deps, accountId: string, options: unknown): Promise<MessageResult> {
  const config = deps.config.llm;
  const parsed = CreateMessageOptions.safeParse(options ?? {});
  if (!parsed.success) throw new BerthError('llm_invalid_request', parsed.error.issues[0]!.message);
  if (!config.provider) {
    throw new BerthError(
      'llm_not_configured',
      'no model provider is configured on this Berth instance (BERTH_LLM_PROVIDER)',
    );
  }
  await countCall(deps, accountId);
  const o = parsed.data;
  try {
    const call = config.provider === 'anthropic' ? callAnthropic : callOpenAi;
    const answer = await call(config, config.models[o.model], o);
    await recordTokens(deps, accountId, answer.usage);
    return { id: answer.id, model: o.model, message: { content: answer.content }, usage: answer.usage };
  } catch (err) {
    if (err instanceof TimeoutError)
      throw new BerthError(
        'llm_timeout',
        `the model did not answer within ${config.timeoutMs / 1000} s; try a shorter request`,
      );
    if (err instanceof HTTPError) {
      const status = err.response.statusCode;
      if (status === 429)
        throw new BerthError('llm_rate_limited', 'the model provider is rate limiting requests; try again later');
      throw new BerthError('llm_provider_error', `the model provider answered ${status}`);
    }
    if (err instanceof BerthError) throw err;
    deps.log.warn({ err: { code: (err as { code?: string }).code } }, 'model provider unreachable');
    throw new BerthError('llm_provider_unavailable', 'the model provider could not be reached');
  }
}
