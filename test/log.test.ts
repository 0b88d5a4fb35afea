// The request log line, which Berth assembles itself for speed, is the line pino writes for the same
// fields, byte for byte, whatever the strings hold.
import { setImmediate as nextTurn } from 'node:timers/promises';
import test from 'ava';
import { createLogger, logRequest, type RequestLine } from '../control-plane/log.ts';

function capture(level = 'info') {
  let text = '';
  const log = createLogger(level, false, { write: (chunk) => (text += chunk), flush: (cb) => cb?.() });
  const lines = async () => {
    await nextTurn();
    return text.split('\n').filter(Boolean);
  };
  return { log, lines };
}

const withoutTime = (line: string) => line.replace(/,"time":"[^"]+"/, '');

test('a request line is the line pino writes for the same fields', async (t) => {
  const { log, lines } = capture();
  const samples: RequestLine[] = [
    { reqId: '3f1c', kind: 'site', host: 'blog', method: 'GET', path: '/', status: 200, ip: '127.0.0.1', ms: 0.42 },
    {
      reqId: 'x',
      kind: 'api',
      host: undefined,
      method: 'PUT',
      path: '/v0/buckets/b/objects/web/a.txt',
      status: 413,
      ip: '::1',
      ms: 12,
    },
    {
      reqId: 'q"uote\\',
      kind: 'site',
      host: 'a"b',
      method: 'M\u0001',
      path: '/\u0000\u001f\u007f\u00ff"\\/é日本',
      status: 499,
      ip: '10.0.0.1',
      ms: 1234.56,
    },
    {
      reqId: 'long',
      kind: 'site',
      host: 'h'.repeat(63),
      method: 'GET',
      path: `/${'p"'.repeat(100)}\n`,
      status: 304,
      ip: '',
      ms: 0,
    },
  ];
  for (const line of samples) {
    logRequest(log, line);
    log.info(line, 'request');
  }
  const written = await lines();
  t.is(written.length, samples.length * 2);
  for (let i = 0; i < samples.length; i++) {
    t.is(withoutTime(written[2 * i]!), withoutTime(written[2 * i + 1]!));
    t.like(JSON.parse(written[2 * i]!), { ...samples[i], level: 30, service: 'berth', msg: 'request' });
  }
});

test('request lines follow the logger level', async (t) => {
  const { log, lines } = capture('warn');
  logRequest(log, { reqId: 'r', kind: 'site', host: 's', method: 'GET', path: '/', status: 200, ip: '::1', ms: 1 });
  t.deepEqual(await lines(), []);
  log.level = 'info';
  logRequest(log, { reqId: 'r', kind: 'site', host: 's', method: 'GET', path: '/', status: 200, ip: '::1', ms: 1 });
  t.is((await lines()).length, 1);
});
