// Debian's caddy (installed by `make test`) in front of a Berth, run as a child of the test in a folder
// of its own (its data dir through HOME and XDG_*): the Caddyfile docs/deploy.md shows, with on-demand
// certificates from the test's pebble, each one asked of Berth's /_berth/tls/allowed first.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { until } from './until.ts';

export interface CaddyOptions {
  httpPort: number;
  httpsPort: number;
  /** The ACME directory and the CA of its own HTTPS (pebble's). */
  directory: string;
  caFile: string;
  /** Berth's plain listener, host:port. */
  berth: string;
}

export interface Caddy {
  output(): string;
  stop(): Promise<void>;
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket.destroy() !== undefined));
    socket.once('error', () => resolve(false));
  });
}

/** docs/deploy.md's Caddyfile, with the test's ports and CA in its global options. */
export const caddyfile = (options: CaddyOptions): string => `{
	admin off
	http_port ${options.httpPort}
	https_port ${options.httpsPort}
	acme_ca ${options.directory}
	acme_ca_root ${options.caFile}
	email ops@example.com
	on_demand_tls {
		ask http://${options.berth}/_berth/tls/allowed
	}
}

https:// {
	tls {
		on_demand
	}
	reverse_proxy ${options.berth} {
		flush_interval -1
	}
	request_body {
		max_size 512MB
	}
}
`;

export async function startCaddy(options: CaddyOptions): Promise<Caddy> {
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-caddy-'));
  const config = path.join(work, 'Caddyfile');
  await fs.writeFile(config, caddyfile(options));
  const child: ChildProcess = spawn('caddy', ['run', '--config', config, '--adapter', 'caddyfile'], {
    cwd: work,
    env: {
      PATH: process.env.PATH,
      HOME: work,
      XDG_DATA_HOME: path.join(work, 'data'),
      XDG_CONFIG_HOME: path.join(work, 'config'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await until(
    async () => {
      if (child.exitCode !== null) throw new Error(`caddy exited; is it installed (make caddy)? ${output}`);
      return (await answers(options.httpsPort)) && (await answers(options.httpPort));
    },
    'caddy listens',
    { ms: 15_000, every: 50 },
  );
  return {
    output: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill();
      await exited;
      await fs.rm(work, { recursive: true, force: true });
    },
  };
}
