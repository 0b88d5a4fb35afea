// A throwaway S3-compatible server for the suite: Ceph's RADOS Gateway from Debian's packages, on a
// one-host Ceph cluster in a temp dir (one monitor, one OSD keeping objects in memory, no cephx, pools
// of size 1), each daemon on a free loopback port. From nothing to an answering endpoint takes about
// 12 s, so a run starts one and every test uses a bucket of its own in it.
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ListBucketsCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from './ports.ts';

export interface ObjectStoreServer {
  /** The gateway's S3 endpoint, `http://127.0.0.1:<port>`. */
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The daemons' pids: monitor, OSD and gateway. */
  pids(): number[];
  /** Stops the gateway alone (the cluster behind it keeps its objects), as an outage would. */
  pause(): Promise<void>;
  /** Starts the gateway again after pause(), on the same port. */
  resume(): Promise<void>;
  /** Stops the gateway where it stands (SIGSTOP): its port still takes connections, and nothing answers. */
  freeze(): void;
  /** Lets a frozen gateway go on (SIGCONT). */
  thaw(): void;
  /** Stops every daemon and removes the files. */
  stop(): Promise<void>;
}

const TIMEOUT_S = 20;

function run(command: string, args: string[], timeoutS = TIMEOUT_S): SpawnSyncReturns<string> {
  // Every ceph tool waits for ever on a monitor that is not there: each call has a deadline.
  return spawnSync('timeout', [String(timeoutS), command, ...args], { encoding: 'utf8' });
}

function check(result: SpawnSyncReturns<string>, what: string): string {
  if (result.status !== 0)
    throw new Error(`${what} failed (${result.status}): ${(result.stderr || result.stdout).trim().slice(-2000)}`);
  return result.stdout;
}

async function until(done: () => boolean, what: string, ms: number, log?: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) {
      const tail = log && fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').slice(-30).join('\n') : '';
      throw new Error(`${what} within ${ms} ms${tail ? `\n${tail}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Waits until the gateway takes the user's keys: a gateway under load may answer 403 for a moment after
 * `radosgw-admin user create`, and a test's first request would fail with it.
 */
async function credentialsTaken(endpoint: string, accessKeyId: string, secretAccessKey: string): Promise<void> {
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey },
  });
  const deadline = Date.now() + 60_000;
  try {
    for (;;) {
      try {
        await client.send(new ListBucketsCommand({}));
        return;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error('radosgw did not take the test user’s keys within 60 s', { cause: err });
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } finally {
    client.destroy();
  }
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

const pidOf = (file: string): number | undefined => {
  try {
    return Number(fs.readFileSync(file, 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
};

const alive = (pid: number | undefined): boolean => pid !== undefined && fs.existsSync(`/proc/${pid}`);

async function stopDaemon(pidFile: string): Promise<void> {
  const pid = pidOf(pidFile);
  if (!alive(pid)) return;
  process.kill(pid!, 'SIGTERM');
  await until(() => !alive(pid), `ceph daemon ${pid} to stop`, 20_000).catch(() => process.kill(pid!, 'SIGKILL'));
}

/** Installed by `make test` (Debian's ceph-mon, ceph-osd, radosgw); a clear error when it is not. */
export function objectStoreInstalled(): boolean {
  return ['ceph-mon', 'ceph-osd', 'radosgw', 'monmaptool'].every((bin) => spawnSync('which', [bin]).status === 0);
}

async function startOnce(credentials?: Credentials): Promise<ObjectStoreServer> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-ceph-'));
  const conf = path.join(root, 'ceph.conf');
  const [monPort, rgwPort] = [await freePort(), await freePort()];
  const fsid = crypto.randomUUID();
  const c = ['-c', conf];
  fs.writeFileSync(
    conf,
    `[global]
fsid = ${fsid}
mon host = v1:127.0.0.1:${monPort}
ms bind msgr2 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd objectstore = memstore
memstore device bytes = 2147483648
run dir = ${root}/run
admin socket = ${root}/run/$name.asok
log file = ${root}/log/$name.log
pid file = ${root}/run/$name.pid
mon data = ${root}/mon/$cluster-$id
osd data = ${root}/osd/$cluster-$id
keyring = ${root}/keyring
[osd]
osd max object name len = 256
osd max object namespace len = 64
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:${rgwPort}
rgw data = ${root}/rgw
rgw dns name = 127.0.0.1
`,
  );
  for (const dir of ['run', 'log', 'mon/ceph-a', 'rgw']) fs.mkdirSync(path.join(root, dir), { recursive: true });
  const pidFiles = { mon: path.join(root, 'run/mon.a.pid'), rgw: path.join(root, 'run/client.rgw.pid') } as Record<
    string,
    string
  >;
  const stopAll = async () => {
    for (const file of fs.readdirSync(path.join(root, 'run')).filter((name) => name.endsWith('.pid')))
      await stopDaemon(path.join(root, 'run', file));
  };
  try {
    check(
      run('monmaptool', [
        '--create',
        '--addv',
        'a',
        `[v1:127.0.0.1:${monPort}]`,
        '--fsid',
        fsid,
        path.join(root, 'monmap'),
      ]),
      'monmaptool',
    );
    check(run('ceph-mon', [...c, '--mkfs', '-i', 'a', '--monmap', path.join(root, 'monmap')]), 'ceph-mon --mkfs');
    check(run('ceph-mon', [...c, '-i', 'a']), 'ceph-mon');
    // The monitor answering on the port must be this cluster's: one of another cluster there (a port
    // handed out twice) makes the OSD fail later with "wrong fsid".
    const answering = run('ceph', [...c, '--connect-timeout', '15', 'fsid']);
    if (answering.status === 0 && answering.stdout.trim() !== fsid)
      throw new Error(`another Ceph monitor answers on port ${monPort}`);
    const osdUuid = crypto.randomUUID();
    // A monitor just started may refuse commands for a moment ("problem getting command descriptions"):
    // asked again, it answers once its authentication is up.
    let created = run('ceph', [...c, '--connect-timeout', '15', 'osd', 'new', osdUuid]);
    for (let i = 0; i < 10 && created.status !== 0 && /command descriptions/.test(created.stderr); i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      created = run('ceph', [...c, '--connect-timeout', '15', 'osd', 'new', osdUuid]);
    }
    const osdId = check(created, 'ceph osd new').trim();
    fs.mkdirSync(path.join(root, `osd/ceph-${osdId}`), { recursive: true });
    check(run('ceph-osd', [...c, '-i', osdId, '--mkfs', '--osd-uuid', osdUuid]), 'ceph-osd --mkfs');
    check(run('ceph-osd', [...c, '-i', osdId]), 'ceph-osd');
    const osdLog = path.join(root, `log/osd.${osdId}.log`);
    await until(
      () => {
        if (fs.existsSync(osdLog) && fs.readFileSync(osdLog, 'utf8').includes('wrong fsid'))
          throw new Error('the OSD started with a wrong fsid');
        return /1 up/.test(run('ceph', [...c, '--connect-timeout', '5', 'osd', 'stat'], 10).stdout);
      },
      'the OSD to come up',
      60_000,
      osdLog,
    );
    const startGateway = async () => {
      check(run('radosgw', [...c, '-n', 'client.rgw']), 'radosgw');
      const deadline = Date.now() + 60_000;
      while (!(await answers(rgwPort))) {
        if (Date.now() > deadline) throw new Error(`radosgw did not answer on ${rgwPort} within 60 s`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    await startGateway();
    const accessKeyId = credentials?.accessKeyId ?? `berth${crypto.randomBytes(6).toString('hex')}`;
    const secretAccessKey = credentials?.secretAccessKey ?? crypto.randomBytes(24).toString('hex');
    check(
      run(
        'radosgw-admin',
        [
          ...c,
          'user',
          'create',
          '--uid=berth',
          '--display-name=Berth tests',
          `--access-key=${accessKeyId}`,
          `--secret-key=${secretAccessKey}`,
        ],
        60,
      ),
      'radosgw-admin user create',
    );
    await credentialsTaken(`http://127.0.0.1:${rgwPort}`, accessKeyId, secretAccessKey);
    let stopped = false;
    let frozen = false;
    const signalGateway = (signal: NodeJS.Signals) => {
      const pid = pidOf(pidFiles.rgw!);
      if (!alive(pid)) throw new Error('the gateway is not running');
      process.kill(pid!, signal);
    };
    const thaw = () => {
      if (!frozen) return;
      frozen = false;
      signalGateway('SIGCONT');
    };
    return {
      endpoint: `http://127.0.0.1:${rgwPort}`,
      accessKeyId,
      secretAccessKey,
      pids: () =>
        fs
          .readdirSync(path.join(root, 'run'))
          .filter((name) => name.endsWith('.pid'))
          .flatMap((name) => pidOf(path.join(root, 'run', name)) ?? []),
      pause: () => stopDaemon(pidFiles.rgw!),
      resume: startGateway,
      freeze() {
        signalGateway('SIGSTOP');
        frozen = true;
      },
      thaw,
      async stop() {
        if (stopped) return;
        stopped = true;
        // A stopped process does not act on SIGTERM until it goes on.
        thaw();
        await stopAll();
        fs.rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await stopAll();
    fs.rmSync(root, { recursive: true, force: true });
    throw err;
  }
}

interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/**
 * Starts a fresh one-host cluster, with a user of the given credentials (random ones by default); a
 * start that fails (Ceph's occasional "wrong fsid") is retried in a new dir.
 */
export async function startObjectStoreServer(credentials?: Credentials): Promise<ObjectStoreServer> {
  if (!objectStoreInstalled())
    throw new Error(
      "Ceph's radosgw is not installed: install Debian's ceph-mon, ceph-osd and radosgw (make test does)",
    );
  let last: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await startOnce(credentials);
    } catch (err) {
      last = err;
      await new Promise((resolve) => setTimeout(resolve, 1000 * (attempt + 1)));
    }
  }
  throw last;
}
