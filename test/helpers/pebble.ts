// Let's Encrypt's ACME test server, Debian's pebble, started in a temp dir for one test file: its own
// HTTPS certificate made with openssl (for localhost and 127.0.0.1), validations without pebble's
// random sleeps, authorizations never reused (every order validates), and names resolved through the
// test's DNS server. `httpPort` is where its validator connects for HTTP-01: Berth's (or Caddy's)
// port-80 listener in the test. `make test` installs it.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import got from 'got';
import { freePort } from './ports.ts';
import { until } from './until.ts';

export interface PebbleOptions {
  /** Port of the HTTP-01 responder under test. */
  httpPort: number;
  /** Port of the TLS-ALPN-01 responder; a port nothing listens on by default. */
  tlsPort?: number;
  /** The DNS server pebble resolves names with (challenge-dns.ts). */
  dnsServer: string;
  /** Lifetime of the certificates it issues, in seconds (pebble's default: five years). */
  validitySeconds?: number;
  /** Refuse 5% of nonces on purpose, as pebble does by default: a correct client retries badNonce. */
  rejectNonces?: boolean;
}

export interface Pebble {
  /** The ACME directory, https://127.0.0.1:<port>/dir. */
  directory: string;
  /** The PEM file of pebble's own HTTPS certificate: the CA to trust for the directory. */
  caFile: string;
  /** The root its certificates chain to (made at each start), PEM: what a TLS client of the test trusts. */
  root: string;
  /** Orders created so far. */
  orders(): number;
  /** Everything it wrote so far. */
  output(): string;
  stop(): Promise<void>;
}

const run = promisify(execFile);

export async function startPebble(options: PebbleOptions): Promise<Pebble> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-pebble-'));
  const certFile = path.join(dir, 'pebble.pem');
  const keyFile = path.join(dir, 'pebble.key');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-keyout',
    keyFile,
    '-out',
    certFile,
  ]);
  const port = await freePort();
  const managementPort = await freePort();
  const config = {
    pebble: {
      listenAddress: `127.0.0.1:${port}`,
      managementListenAddress: `127.0.0.1:${managementPort}`,
      certificate: certFile,
      privateKey: keyFile,
      httpPort: options.httpPort,
      tlsPort: options.tlsPort ?? (await freePort()),
      ocspResponderURL: '',
      externalAccountBindingRequired: false,
      ...(options.validitySeconds ? { certificateValidityPeriod: options.validitySeconds } : {}),
    },
  };
  const configFile = path.join(dir, 'pebble.json');
  await fs.writeFile(configFile, JSON.stringify(config));
  const child: ChildProcess = spawn('pebble', ['-config', configFile, '-dnsserver', options.dnsServer], {
    env: {
      ...process.env,
      PEBBLE_VA_NOSLEEP: '1',
      PEBBLE_AUTHZREUSE: '0',
      PEBBLE_WFE_NONCEREJECT: options.rejectNonces ? '5' : '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const management = got.extend({
    prefixUrl: `https://127.0.0.1:${managementPort}`,
    https: { certificateAuthority: await fs.readFile(certFile) },
    retry: { limit: 0 },
  });
  const root = await until(
    async () => {
      if (child.exitCode !== null) throw new Error(`pebble exited; is it installed (make pebble)? ${output}`);
      try {
        return (await management.get('roots/0')).body;
      } catch {
        return false;
      }
    },
    'pebble answers',
    { ms: 15_000, every: 50 },
  );
  return {
    directory: `https://127.0.0.1:${port}/dir`,
    caFile: certFile,
    root,
    orders: () => output.split('\n').filter((line) => /Added order/.test(line)).length,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill();
      await exited;
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}
