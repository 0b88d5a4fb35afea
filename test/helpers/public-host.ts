// A host on a public-looking address (11.0.0.2), for what functions may reach through the egress
// proxy: a network namespace made for the caller, joined to this one by a veth pair (11.0.0.1/30 on
// this side), with test/fixtures/public-server.mjs listening on port 80 inside. Needs root (ip netns).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import path from 'node:path';

export const PUBLIC_ADDRESS = '11.0.0.2';

export interface PublicHost {
  address: string;
  stop(): Promise<void>;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

export async function startPublicHost(): Promise<PublicHost> {
  const ns = `berth-public-${process.pid}`;
  const id = process.pid % 100000;
  const removeNamespace = () => {
    try {
      ip('netns', 'del', ns);
    } catch {
      // Not made: nothing to remove.
    }
  };
  try {
    ip('netns', 'add', ns);
    ip('link', 'add', `bp${id}h`, 'type', 'veth', 'peer', 'name', `bp${id}n`);
    ip('link', 'set', `bp${id}n`, 'netns', ns);
    ip('addr', 'add', '11.0.0.1/30', 'dev', `bp${id}h`);
    ip('link', 'set', `bp${id}h`, 'up');
    ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${PUBLIC_ADDRESS}/30`, 'dev', `bp${id}n`);
    ip('netns', 'exec', ns, 'ip', 'link', 'set', `bp${id}n`, 'up');
    ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up');
  } catch (err) {
    removeNamespace();
    throw new Error(
      `a host on a public-looking address needs a network namespace (ip netns, as root): ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`,
    );
  }
  const server: ChildProcess = spawn(
    'ip',
    [
      'netns',
      'exec',
      ns,
      process.execPath,
      path.resolve(import.meta.dirname, '../fixtures/public-server.mjs'),
      PUBLIC_ADDRESS,
      '80',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout!.once('data', () => resolve());
      server.once('exit', (code) => reject(new Error(`the public server exited with ${code}`)));
    });
  } catch (err) {
    removeNamespace();
    throw err;
  }
  return {
    address: PUBLIC_ADDRESS,
    async stop() {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill();
      await exited;
      removeNamespace();
    },
  };
}
