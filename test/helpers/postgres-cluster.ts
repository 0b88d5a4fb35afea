// A throwaway PostgreSQL cluster for the suite: Debian's server binaries, `initdb` into a temp dir as an
// unprivileged system user (PostgreSQL refuses to run as root), a private unix socket directory and a
// free TCP port on loopback. Connections over the socket are trusted (the suite's admin); connections
// over TCP need a password (Berth's role), as on a real server.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';

export interface Cluster {
  /** The superuser's URL, over the unix socket. */
  adminUrl: string;
  /** The TCP port on 127.0.0.1. */
  port: number;
  /** The postmaster's pid (its children are the server's other processes). */
  serverPid(): number;
  /** Shuts the server down as an operator would (`pg_ctl stop -m fast`: sessions are ended), keeping its data. */
  pause(): void;
  /** Starts it again after pause(), on the same port and data. */
  resume(): void;
  /** Stops the server and removes its files. */
  stop(): void;
}

/** The newest PostgreSQL server installed by Debian's packages. */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'postgres')))
    : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest)
    throw new Error(`no PostgreSQL server under ${root}: install Debian's postgresql package (make test does)`);
  return path.join(root, newest, 'bin');
}

/** Runs a server binary as the cluster's owner: `postgres` when we are root, ourselves otherwise. */
function asOwner(bin: string, args: string[]): void {
  const [command, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const result = spawnSync(command, argv, { encoding: 'utf8' });
  if (result.status !== 0)
    throw new Error(`${path.basename(bin)} failed (${result.status}): ${result.stderr || result.stdout}`);
}

/** `durable`: PostgreSQL's own crash safety (fsync, synchronous commit), as benchmarks need; tests go without. */
export async function startCluster(options: { durable?: boolean } = {}): Promise<Cluster> {
  const bin = postgresBinDir();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-postgres-'));
  const data = path.join(root, 'data');
  const sockets = path.join(root, 'sockets');
  fs.mkdirSync(sockets);
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
    fs.chownSync(root, uid, gid);
    fs.chownSync(sockets, uid, gid);
  }
  const port = await freePort();
  asOwner(path.join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    'postgres',
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    '-E',
    'UTF8',
    '--locale=C',
    '--no-sync',
  ]);
  // A test cluster trades crash safety for speed (its data is thrown away); Berth's own durability is
  // PostgreSQL's commit, which these settings do not change the semantics of for a running server.
  const fast = options.durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off'];
  const serverOptions = [
    `-p ${port}`,
    `-k ${sockets}`,
    '-c listen_addresses=127.0.0.1',
    ...fast,
    '-c max_connections=400',
  ].join(' ');
  let running = false;
  const start = () => {
    asOwner(path.join(bin, 'pg_ctl'), [
      '-D',
      data,
      '-l',
      path.join(root, 'server.log'),
      '-w',
      '-t',
      '60',
      '-o',
      serverOptions,
      'start',
    ]);
    running = true;
  };
  start();
  let stopped = false;
  return {
    adminUrl: `postgres://postgres@localhost:${port}/postgres?host=${encodeURIComponent(sockets)}`,
    port,
    serverPid: () => Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]),
    pause() {
      asOwner(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']);
      running = false;
    },
    resume: start,
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        if (running) asOwner(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        fs.rmSync(root, { recursive: true, force: true });
      }
    },
  };
}
