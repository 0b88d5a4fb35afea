// The HTTPS run of `make bench`: what TLS costs Berth (BERTH_TLS=acme) on the 1 KiB web file. A fresh
// Berth gets its certificate from Let's Encrypt's test CA (Debian's pebble, names resolved by
// pebble-challtestsrv) at a first handshake made before anything is measured, so no run holds an
// order. Then, in one run and each side under the same load:
//   kept connections: the file over Berth's HTTPS listener against the same Berth's plain listener
//   new connections:  the same with every request on a connection of its own (a full handshake each)
//   against Node:     Berth over HTTPS against a bare Node `https.createServer` holding the same bytes,
//                     with the same certificate chain and key (read from Berth's metadata), new
//                     connections
// The server CPU per request that HTTPS adds with new connections, less what it adds on kept ones, is
// the handshake's.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type got from 'got';
import { masterKeyFileOf } from '../control-plane/config.ts';
import { openMetadata } from '../control-plane/db/metadata.ts';
import { readCertificate } from '../control-plane/tls/certificate-store.ts';
import { loadMasterKey } from '../storage/master-key.ts';
import { startChallengeDns } from '../test/helpers/challenge-dns.ts';
import { startPebble } from '../test/helpers/pebble.ts';
import { httpsClient } from '../test/helpers/tls-client.ts';
import { until } from '../test/helpers/until.ts';
import { freePort, ROOT, SERVER_CORE, type Server, startPinned } from './harness.ts';
import type { LoadTarget } from './load-worker.ts';
import type { Comparison } from './comparison.ts';

export interface HttpsResults {
  /** The certificate both HTTPS sides show. */
  certificate: string;
  /** Berth over HTTPS (the "berth" side) against the same Berth over plain HTTP, kept connections. */
  kept: Comparison;
  /** The same with a new connection for every request. */
  fresh: Comparison;
  /** Berth over HTTPS against bare Node `https`, a new connection for every request. */
  againstNode: Comparison;
  /** Server CPU per request that HTTPS adds on a kept connection, in µs. */
  addedPerRequestUs: number;
  /** Server CPU per request that HTTPS adds with a new connection for each, in µs. */
  addedPerNewConnectionUs: number;
  /** The handshake alone: the added cost with new connections less that with kept ones, in µs. */
  handshakeUs: number;
}

interface BerthUnderTest {
  server: Server;
  origin: string;
  port: number;
  api: typeof got;
  site: { bucketId: string };
  dataDir: string;
}

interface Options {
  work: string;
  /** The 1 KiB file, and the directory holding it as small.bin for the bare Node baseline. */
  small: Buffer;
  filesDir: string;
  connections: number;
  startBerth: (dir: string, env: NodeJS.ProcessEnv) => Promise<BerthUnderTest>;
  compare: (name: string, baseline: [Server, LoadTarget], berth: [Server, LoadTarget]) => Promise<Comparison>;
  same: (condition: boolean, what: string) => void;
}

const SITE_HOST = 'sites.example.com';
const NAME = `bench.${SITE_HOST}`;

export async function httpsCosts(o: Options): Promise<HttpsResults> {
  const dns = await startChallengeDns();
  const httpPort = await freePort();
  const pebble = await startPebble({ httpPort, dnsServer: dns.address });
  let node: Server | undefined;
  let berth: BerthUnderTest | undefined;
  try {
    const httpsPort = await freePort();
    berth = await o.startBerth(path.join(o.work, 'https'), {
      BERTH_TLS: 'acme',
      BERTH_TLS_BIND: '127.0.0.1',
      BERTH_HTTPS_PORT: String(httpsPort),
      BERTH_HTTP_PORT: String(httpPort),
      BERTH_ACME_DIRECTORY: pebble.directory,
      BERTH_ACME_CA_FILE: pebble.caFile,
      BERTH_SITE_HOST: SITE_HOST,
      BERTH_DNS_SERVERS: dns.address,
    });
    await berth.api.put(`v0/buckets/${berth.site.bucketId}/objects/web/small.bin`, {
      body: o.small,
      headers: { 'content-type': 'application/octet-stream' },
    });
    const client = httpsClient(pebble.root);
    // The first handshake orders the certificate; nothing measured waits for it.
    const first = await until(
      () =>
        client.get(`https://${NAME}:${httpsPort}/small.bin`, { responseType: 'buffer' }).catch(() => false as const),
      'the first answer over HTTPS (the certificate ordered)',
      { ms: 60_000, every: 200 },
    );
    o.same(first.statusCode === 200 && first.body.equals(o.small), 'the 1 KiB file over Berth’s HTTPS listener');
    const plain = await client.get(`${berth.origin}/small.bin`, {
      headers: { host: `${NAME}:${berth.port}` },
      responseType: 'buffer',
    });
    o.same(plain.statusCode === 200 && plain.body.equals(o.small), 'the 1 KiB file over Berth’s plain listener');

    // The baseline serves the certificate and key Berth got, as Berth stored them.
    const metadata = await openMetadata(
      { dataDir: berth.dataDir, databaseUrl: '', databasePool: 1 },
      { create: false },
    );
    const masterKey = loadMasterKey(masterKeyFileOf({ masterKeyFile: '', dataDir: berth.dataDir }));
    const stored = await readCertificate({ db: metadata.db, masterKey }, NAME).finally(() => metadata.close());
    if (!stored) throw new Error(`Berth answered over HTTPS but holds no certificate for ${NAME}`);
    const certFile = path.join(o.work, 'https-baseline.pem');
    const keyFile = path.join(o.work, 'https-baseline.key');
    await fs.writeFile(certFile, stored.certificate);
    await fs.writeFile(keyFile, stored.key, { mode: 0o600 });
    const nodePort = await freePort();
    node = await startPinned(
      'bare node https',
      SERVER_CORE,
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(ROOT, 'bench/baselines.ts'),
        'https',
        String(nodePort),
        o.filesDir,
        certFile,
        keyFile,
      ],
      process.env,
      { ready: (l) => l === 'ready' },
    );
    const viaNode = await client.get(`https://${NAME}:${nodePort}/small.bin`, { responseType: 'buffer' });
    o.same(viaNode.statusCode === 200 && viaNode.body.equals(o.small), 'the 1 KiB file over bare Node https');
    const certificate = `${describe(stored.certificate)}, issued by pebble to Berth at its first handshake; the bare Node baseline serves the same chain and key`;
    console.log(`  certificate: ${certificate}`);

    const tls = { ca: pebble.root, servername: NAME };
    const target = (label: string, port: number, secure: boolean, newConnections: boolean): LoadTarget => ({
      label,
      origin: `${secure ? 'https' : 'http'}://127.0.0.1:${port}`,
      path: '/small.bin',
      connections: o.connections,
      headers: { host: `${NAME}:${port}` },
      ...(secure ? { tls } : {}),
      ...(newConnections ? { newConnections } : {}),
    });
    const b = berth.server;
    const kept = await o.compare(
      '1 KiB web file over HTTPS, kept connections',
      [b, target('berth over HTTP, kept connections', berth.port, false, false)],
      [b, target('berth over HTTPS, kept connections', httpsPort, true, false)],
    );
    const fresh = await o.compare(
      '1 KiB web file over HTTPS, a new connection per request',
      [b, target('berth over HTTP, new connections', berth.port, false, true)],
      [b, target('berth over HTTPS, new connections', httpsPort, true, true)],
    );
    const againstNode = await o.compare(
      '1 KiB web file over HTTPS, a new connection per request, against bare Node',
      [node, target('bare node https, new connections', nodePort, true, true)],
      [b, target('berth over HTTPS, new connections', httpsPort, true, true)],
    );
    const addedPerRequestUs = kept.berth.cpuPerRequestUs - kept.baseline.cpuPerRequestUs;
    const addedPerNewConnectionUs = fresh.berth.cpuPerRequestUs - fresh.baseline.cpuPerRequestUs;
    const handshakeUs = addedPerNewConnectionUs - addedPerRequestUs;
    console.log(
      `  → HTTPS adds ${Math.round(addedPerRequestUs)} µs of server CPU per request on a kept connection, ` +
        `${Math.round(addedPerNewConnectionUs)} µs with a new connection for each: the handshake ${Math.round(handshakeUs)} µs\n`,
    );
    return { certificate, kept, fresh, againstNode, addedPerRequestUs, addedPerNewConnectionUs, handshakeUs };
  } finally {
    await node?.stop();
    await berth?.server.stop();
    await pebble.stop();
    await dns.stop();
  }
}

/** The leaf's key and the chain's length, e.g. "ECDSA (prime256v1) leaf, chain of 2". */
function describe(chain: string): string {
  const pems = chain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  const key = new crypto.X509Certificate(pems[0]!).publicKey;
  const kind =
    key.asymmetricKeyType === 'ec' ? `ECDSA (${key.asymmetricKeyDetails?.namedCurve})` : key.asymmetricKeyType;
  return `${kind} leaf, chain of ${pems.length}`;
}
