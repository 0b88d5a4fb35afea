// ctx.llm.messages.create against a real local provider of the test's own (no network): both
// protocols, every option rule, timeouts, provider failures and the account's daily allowance.
import test from 'ava';
import { DEFAULTS } from '../control-plane/config.ts';
import { createSite, deployFixture, startTestBerth } from './helpers/berth.ts';
import { type FakeProvider, startFakeProvider } from './helpers/fake-llm.ts';

/** A server and a provider of the test's own (tests in a file run concurrently). */
async function berthWith(
  t: { teardown(fn: () => Promise<void>): void },
  llm: (provider: FakeProvider) => Partial<typeof DEFAULTS.llm>,
) {
  const provider = await startFakeProvider();
  t.teardown(() => provider.close());
  const t0 = await startTestBerth({
    llm: {
      ...DEFAULTS.llm,
      models: { 'model-6-luna': 'small-model', 'model-6.1-sol': 'big-model' },
      apiKey: 'test-key',
      ...llm(provider),
    },
  });
  t.teardown(() => t0.dispose());
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'llm');
  const call = async (options: unknown, query = '') => {
    const res = await t0.site(site.subdomain).post(`api/llm${query}`, { json: options });
    return { status: res.statusCode, body: JSON.parse(res.body) };
  };
  return { t0, call, provider };
}

const user = (content: string) => ({ messages: [{ role: 'user', content }] });

test('an OpenAI-compatible provider: defaults, model mapping and the result shape', async (t) => {
  const { call, provider } = await berthWith(t, (p) => ({ provider: 'openai', baseUrl: `${p.url}/v1` }));
  const { body } = await call({
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ],
  });
  t.deepEqual(body.result, {
    id: 'chatcmpl-1',
    model: 'model-6-luna',
    message: { content: 'echo: hi' },
    usage: { inputTokens: 9, outputTokens: 2 },
  });
  const sent = provider.requests.at(-1)!;
  t.is(sent.path, '/v1/chat/completions');
  t.is(sent.headers.authorization, 'Bearer test-key');
  t.like(sent.body, { model: 'small-model', max_tokens: 4096, reasoning_effort: 'low' });
  t.is(sent.body.messages.length, 2);

  await call({ ...user('hi'), model: 'model-6.1-sol', reasoningEffort: 'high', maxOutputTokens: 16 });
  t.like(provider.requests.at(-1)!.body, { model: 'big-model', max_tokens: 16, reasoning_effort: 'high' });
  await call({ ...user('hi'), reasoningEffort: 'none' });
  t.false('reasoning_effort' in provider.requests.at(-1)!.body);
});

test('the Anthropic Messages API: system prompt, key header and text content', async (t) => {
  const { call, provider } = await berthWith(t, (p) => ({ provider: 'anthropic', baseUrl: p.url }));
  const { body } = await call({
    model: 'model-6.1-sol',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hello' },
    ],
  });
  t.deepEqual(body.result, {
    id: 'msg_1',
    model: 'model-6.1-sol',
    message: { content: 'echo: hello' },
    usage: { inputTokens: 11, outputTokens: 3 },
  });
  const sent = provider.requests.at(-1)!;
  t.is(sent.path, '/v1/messages');
  t.is(sent.headers['x-api-key'], 'test-key');
  t.like(sent.body, { model: 'big-model', system: 'be brief', max_tokens: 4096 });
  t.deepEqual(sent.body.messages, [{ role: 'user', content: 'hello' }]);
});

test('every option rule answers llm_invalid_request before any provider call', async (t) => {
  const { call, provider } = await berthWith(t, (p) => ({ provider: 'openai', baseUrl: `${p.url}/v1` }));
  const cases: Array<[unknown, RegExp]> = [
    [{ messages: [] }, /1–100 messages/],
    [{ messages: Array.from({ length: 101 }, () => ({ role: 'user', content: 'x' })) }, /1–100 messages/],
    [{ ...user('x'), model: 'gpt-5' }, /model must be/],
    [{ ...user('x'), model: 'model-6.1-sol', reasoningEffort: 'none' }, /only available with model-6-luna/],
    [{ ...user('x'), maxOutputTokens: 15 }, /16–8192/],
    [{ ...user('x'), maxOutputTokens: 8193 }, /16–8192/],
    [{ messages: [{ role: 'assistant', content: 'x' }] }, /at least one message must have the user role/],
    [
      {
        messages: [
          { role: 'user', content: 'x' },
          { role: 'system', content: 'late' },
        ],
      },
      /only the first message/,
    ],
    [{ messages: [{ role: 'tool', content: 'x' }] }, /role must be/],
    [user('x'.repeat(32_001)), /at most 32000 characters/],
    [
      {
        messages: [
          { role: 'user', content: 'é'.repeat(16_000) },
          { role: 'user', content: 'é'.repeat(16_001) },
        ],
      },
      /64000 bytes/,
    ],
    [{ ...user('x'), stream: true }, /./],
  ];
  for (const [options, message] of cases) {
    const { body } = await call(options);
    t.like(
      body.error,
      { name: 'BerthContextError', code: 'llm_invalid_request', status: 400 },
      JSON.stringify(options).slice(0, 60),
    );
    t.regex(body.error.message, message);
  }
  t.is(provider.requests.length, 0);
  t.truthy((await call(user('x'.repeat(32_000)))).body.result);
});

test('timeouts, provider failures and the daily allowance have stable codes; failed calls count', async (t) => {
  const { t0, call } = await berthWith(t, (p) => ({
    provider: 'openai',
    baseUrl: `${p.url}/v1`,
    timeoutMs: 300,
    dailyCalls: 3,
  }));
  t.like((await call(user('slow'))).body.error, { code: 'llm_timeout', status: 504 });
  t.like((await call(user('fail'))).body.error, { code: 'llm_provider_error', status: 502 });
  t.truthy((await call(user('fine'))).body.result);
  const over = await call(user('fine'));
  t.like(over.body.error, { code: 'llm_usage_exceeded', status: 429 });
  t.regex(over.body.error.message, /3 model calls/);

  // Uncaught in the handler, the error answers with its own status, code and message.
  const uncaught = await call(user('fine'), '?uncaught');
  t.is(uncaught.status, 429);
  t.is(uncaught.body.error.code, 'llm_usage_exceeded');
  t.regex(uncaught.body.error.message, /model calls/);

  const usage = await t0.berth.deps.db('llm_usage').where({ account_id: t0.owner.id }).first();
  t.is(usage.calls, 5);
});

test('without a provider, calls answer llm_not_configured', async (t) => {
  const { call } = await berthWith(t, () => ({}));
  t.like((await call(user('hi'))).body.error, { code: 'llm_not_configured', status: 503 });
});
