// A DNS server the test controls: Debian's pebble-challtestsrv (Let's Encrypt's test DNS server, which
// pebble resolves through too). Every A query is answered with 127.0.0.1 and no AAAA, so any test name
// (shop.example.com) reaches this machine and nothing leaves it; TXT records are set and cleared at run
// time through its management port. `make test` installs it with pebble.
import { type ChildProcess, spawn } from 'node:child_process';
import got from 'got';
import { freePort } from './ports.ts';
import { until } from './until.ts';

export interface ChallengeDns {
  /** 127.0.0.1:<port>, as BERTH_DNS_SERVERS and pebble's -dnsserver take it. */
  address: string;
  setTxt(name: string, value: string): Promise<void>;
  clearTxt(name: string): Promise<void>;
  /** Answers A queries for `name` with `address` instead of 127.0.0.1. */
  addA(name: string, address: string): Promise<void>;
  clearA(name: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startChallengeDns(): Promise<ChallengeDns> {
  const dnsPort = await freePort();
  const managementPort = await freePort();
  const child: ChildProcess = spawn(
    'pebble-challtestsrv',
    [
      '-dns01',
      `127.0.0.1:${dnsPort}`,
      '-management',
      `127.0.0.1:${managementPort}`,
      '-http01',
      '',
      '-https01',
      '',
      '-tlsalpn01',
      '',
      '-defaultIPv6',
      '',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const management = `http://127.0.0.1:${managementPort}`;
  await until(
    async () => {
      if (child.exitCode !== null) throw new Error('pebble-challtestsrv exited; is it installed (make pebble)?');
      try {
        await got.post(`${management}/clear-txt`, { json: { host: '_probe.example.com.' }, retry: { limit: 0 } });
        return true;
      } catch {
        return false;
      }
    },
    'the test DNS server answers',
    { ms: 10_000, every: 50 },
  );
  const fqdn = (name: string) => (name.endsWith('.') ? name : `${name}.`);
  return {
    address: `127.0.0.1:${dnsPort}`,
    setTxt: async (name, value) => {
      await got.post(`${management}/set-txt`, { json: { host: fqdn(name), value } });
    },
    clearTxt: async (name) => {
      await got.post(`${management}/clear-txt`, { json: { host: fqdn(name) } });
    },
    addA: async (name, address) => {
      await got.post(`${management}/add-a`, { json: { host: fqdn(name), addresses: [address] } });
    },
    clearA: async (name) => {
      await got.post(`${management}/clear-a`, { json: { host: fqdn(name) } });
    },
    stop: async () => {
      child.kill();
      await exited;
    },
  };
}
