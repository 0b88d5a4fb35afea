// Configuration is read once from the environment, with clear errors for bad values.
import test from 'ava';
import { ConfigError, DEFAULTS, loadConfig } from '../control-plane/config.ts';

test('unset variables take the embedded defaults', (t) => {
  const config = loadConfig({});
  t.like(config, { port: 8080, bind: '127.0.0.1', siteHost: 'localhost', functionTimeoutMs: 30_000, cronTickMs: 1000 });
  t.is(config.llm.provider, '');
  t.true(config.dataDir.endsWith('.berth'));
  t.is(DEFAULTS.llm.timeoutMs, 45_000);
});

test('model providers are configured by environment variables', (t) => {
  const config = loadConfig({
    BERTH_LLM_PROVIDER: 'anthropic',
    BERTH_LLM_API_KEY: 'k',
    BERTH_LLM_MODEL_LUNA: 'claude-small',
    BERTH_LLM_MODEL_SOL: 'claude-large',
  });
  t.like(config.llm, { provider: 'anthropic', baseUrl: 'https://api.anthropic.com', apiKey: 'k', dailyCalls: 1000 });
  t.deepEqual(config.llm.models, { 'model-6-luna': 'claude-small', 'model-6.1-sol': 'claude-large' });
  const ollama = loadConfig({ BERTH_LLM_PROVIDER: 'openai', BERTH_LLM_BASE_URL: 'http://127.0.0.1:11434/v1', BERTH_LLM_MODEL_LUNA: 'llama3', BERTH_LLM_MODEL_SOL: 'llama3:70b' });
  t.is(ollama.llm.baseUrl, 'http://127.0.0.1:11434/v1');
});

test('bad values are refused with the variable named', (t) => {
  for (const [env, message] of [
    [{ BERTH_PORT: '70000' }, /BERTH_PORT/],
    [{ BERTH_SITE_HOST: '.bad' }, /BERTH_SITE_HOST/],
    [{ BERTH_LOG_LEVEL: 'loud' }, /BERTH_LOG_LEVEL/],
    [{ BERTH_LLM_PROVIDER: 'other' }, /BERTH_LLM_PROVIDER/],
    [{ BERTH_LLM_PROVIDER: 'openai' }, /BERTH_LLM_MODEL_LUNA/],
  ] as const) {
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex(error.message, message);
  }
});
