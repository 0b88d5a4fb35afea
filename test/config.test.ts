// Configuration is read once from the environment, with clear errors for bad values.
import test from 'ava';
import { ConfigError, DEFAULTS, loadConfig, workerMemoryFor, workersFor } from '../control-plane/config.ts';

test('unset variables take the embedded defaults', (t) => {
  const config = loadConfig({});
  t.like(config, { port: 8080, bind: '127.0.0.1', siteHost: 'localhost', functionTimeoutMs: 30_000, cronTickMs: 1000 });
  t.is(config.llm.provider, '');
  t.true(config.dataDir.endsWith('.berth'));
  t.is(DEFAULTS.llm.timeoutMs, 45_000);
});

test("the workers' memory budget and count follow the machine's memory unless set", (t) => {
  const GIB = 1024 ** 3;
  t.is(workerMemoryFor(24 * GIB), Math.floor(24 * 1024 * 0.7) * 1024 * 1024);
  t.is(workersFor(24 * GIB), 1075);
  t.is(workersFor(1 * GIB), 64, 'a small machine keeps the old cap');
  t.is(workersFor(1024 * GIB), 10_000);
  const config = loadConfig({ BERTH_WORKER_MEMORY_MB: '2048', BERTH_MAX_WORKERS: '100' });
  t.is(config.workerMemoryBytes, 2048 * 1024 * 1024);
  t.is(config.maxWorkers, 100);
  t.throws(() => loadConfig({ BERTH_WORKER_MEMORY_MB: '10' }), {
    instanceOf: ConfigError,
    message: /BERTH_WORKER_MEMORY_MB/,
  });
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
  const ollama = loadConfig({
    BERTH_LLM_PROVIDER: 'openai',
    BERTH_LLM_BASE_URL: 'http://127.0.0.1:11434/v1',
    BERTH_LLM_MODEL_LUNA: 'llama3',
    BERTH_LLM_MODEL_SOL: 'llama3:70b',
  });
  t.is(ollama.llm.baseUrl, 'http://127.0.0.1:11434/v1');
});

test('bad values are refused with the variable named', (t) => {
  for (const [env, message] of [
    [{ BERTH_PORT: '70000' }, /BERTH_PORT/],
    [{ BERTH_SITE_HOST: '.bad' }, /BERTH_SITE_HOST/],
    [{ BERTH_LOG_LEVEL: 'loud' }, /BERTH_LOG_LEVEL/],
    [{ BERTH_LLM_PROVIDER: 'other' }, /BERTH_LLM_PROVIDER/],
    [{ BERTH_LLM_PROVIDER: 'openai' }, /BERTH_LLM_MODEL_LUNA/],
    [{ BERTH_PUBLIC_URL: 'example.com' }, /BERTH_PUBLIC_URL/],
    [
      { BERTH_PUBLIC_URL: 'https://example.com/berth' },
      /BERTH_PUBLIC_URL must be an http:\/\/ or https:\/\/ origin with no path/,
    ],
    [{ BERTH_PUBLIC_URL: 'ftp://example.com' }, /BERTH_PUBLIC_URL/],
    [{ BERTH_TRUST_PROXY: 'maybe' }, /BERTH_TRUST_PROXY must be true or false/],
  ] as const) {
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex(error.message, message);
  }
});

test('the public URL is kept as an origin; trusting a proxy is off unless asked', (t) => {
  t.like(loadConfig({}), { publicUrl: '', trustProxy: false });
  t.like(loadConfig({ BERTH_PUBLIC_URL: 'https://Example.com/', BERTH_TRUST_PROXY: 'true' }), {
    publicUrl: 'https://example.com',
    trustProxy: true,
  });
  t.is(loadConfig({ BERTH_PUBLIC_URL: 'https://example.com:8443' }).publicUrl, 'https://example.com:8443');
  t.false(loadConfig({ BERTH_TRUST_PROXY: '0' }).trustProxy);
});

test('a node is named, given roles, a cluster address and its TLS files; a cluster needs PostgreSQL', (t) => {
  const pg = { BERTH_DATABASE_URL: 'postgres://berth@db.example.com/berth' };
  const node = loadConfig({
    ...pg,
    BERTH_NODE_ID: 'node-b',
    BERTH_ROLES: ' Web ',
    BERTH_CLUSTER_ADDRESS: 'http://10.0.0.3:8081/',
  });
  t.like(node, { nodeId: 'node-b', roles: ['web'], clusterAddress: 'http://10.0.0.3:8081', clusterListen: '' });
  t.deepEqual(loadConfig({}).roles, ['web', 'database']);
  const tls = {
    BERTH_CLUSTER_TLS_CERT: '/etc/berth/node.pem',
    BERTH_CLUSTER_TLS_KEY: '/etc/berth/node.key',
    BERTH_CLUSTER_TLS_CA: '/etc/berth/ca.pem',
  };
  t.deepEqual(loadConfig({ ...pg, ...tls, BERTH_CLUSTER_ADDRESS: 'https://10.0.0.3:8081' }).clusterTls, {
    cert: '/etc/berth/node.pem',
    key: '/etc/berth/node.key',
    ca: '/etc/berth/ca.pem',
  });
  for (const [env, message] of [
    [{ ...pg, BERTH_NODE_ID: 'node b' }, /BERTH_NODE_ID/],
    [{ ...pg, BERTH_ROLES: 'web,cache' }, /BERTH_ROLES/],
    [{ ...pg, BERTH_CLUSTER_ADDRESS: 'http://10.0.0.3' }, /BERTH_CLUSTER_ADDRESS .*with a port/],
    [{ ...pg, BERTH_CLUSTER_ADDRESS: 'https://10.0.0.3:8081/path' }, /BERTH_CLUSTER_ADDRESS/],
    [{ ...pg, BERTH_CLUSTER_LISTEN: '0.0.0.0:8081' }, /BERTH_CLUSTER_LISTEN needs BERTH_CLUSTER_ADDRESS/],
    [{ BERTH_CLUSTER_ADDRESS: 'http://10.0.0.3:8081' }, /needs BERTH_DATABASE_URL/],
    [{ BERTH_ROLES: 'web' }, /must include database when the metadata is on SQLite/],
    [
      { ...pg, BERTH_CLUSTER_ADDRESS: 'http://10.0.0.3:8081', BERTH_CLUSTER_TLS_CERT: '/etc/berth/node.pem' },
      /go together/,
    ],
    [{ ...pg, BERTH_CLUSTER_ADDRESS: 'http://10.0.0.3:8081', ...tls }, /https:\/\/ origin .*uses TLS/],
    [{ ...pg, ...tls }, /need BERTH_CLUSTER_ADDRESS/],
  ] as const) {
    t.throws(() => loadConfig(env), { instanceOf: ConfigError, message }, JSON.stringify(env));
  }
});

test('HTTPS by Berth itself: off unless BERTH_TLS=acme; its ports, address and directory, with defaults', (t) => {
  t.is(loadConfig({}).tls, null, 'plain HTTP unless asked');
  t.deepEqual(loadConfig({ BERTH_TLS: 'acme' }).tls, {
    bind: '0.0.0.0',
    httpsPort: 443,
    httpPort: 80,
    directory: 'https://acme-v02.api.letsencrypt.org/directory',
    email: '',
    caFile: '',
    renewCheckMs: 3600_000,
  });
  const tls = loadConfig({
    BERTH_TLS: 'acme',
    BERTH_TLS_BIND: '192.0.2.1',
    BERTH_HTTPS_PORT: '8443',
    BERTH_HTTP_PORT: '8081',
    BERTH_ACME_DIRECTORY: 'https://127.0.0.1:14000/dir',
    BERTH_ACME_EMAIL: 'ops@example.com',
    BERTH_ACME_CA_FILE: '/etc/pebble.pem',
    BERTH_TLS_RENEW_CHECK_MS: '1000',
  }).tls;
  t.like(tls, {
    bind: '192.0.2.1',
    httpsPort: 8443,
    httpPort: 8081,
    email: 'ops@example.com',
    caFile: '/etc/pebble.pem',
  });
  t.is(loadConfig({ BERTH_TLS: 'acme', BERTH_PORT: '9090' }).port, 9090, 'the plain listener stays');
  for (const [env, message] of [
    [{ BERTH_TLS: 'yes' }, /BERTH_TLS must be "acme"/],
    [{ BERTH_TLS: 'acme', BERTH_ACME_DIRECTORY: 'http://ca.example.com/dir' }, /BERTH_ACME_DIRECTORY must be an https/],
    [{ BERTH_TLS: 'acme', BERTH_ACME_EMAIL: 'nobody' }, /BERTH_ACME_EMAIL/],
    [{ BERTH_TLS: 'acme', BERTH_HTTPS_PORT: '80' }, /must differ/],
    [{ BERTH_TLS: 'acme', BERTH_TRUST_PROXY: 'true' }, /BERTH_TRUST_PROXY is for a proxy in front/],
  ] as const)
    t.throws(() => loadConfig(env), { instanceOf: ConfigError, message }, JSON.stringify(env));
});
