// Debian's nginx for the suite (installed by `make test`), run as a child of the test in a folder of
// its own: the test gives the `http { … }` block's own lines (servers, upstreams), this file the rest.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const NGINX = '/usr/sbin/nginx';

export interface Nginx {
  /** Its folder: temp files, pid and error log. */
  work: string;
  stop(): void;
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket.destroy() !== undefined));
    socket.once('error', () => resolve(false));
  });
}

/** Starts nginx with `http` inside its http block, and resolves once it listens on `port`. */
export async function startNginx(http: (work: string) => string, port: number): Promise<Nginx> {
  if (!fs.existsSync(NGINX))
    throw new Error(`${NGINX} is missing: make test installs Debian's nginx (apt-get install nginx)`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-nginx-'));
  for (const dir of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(work, dir));
  fs.writeFileSync(
    path.join(work, 'nginx.conf'),
    `${process.getuid?.() === 0 ? 'user root;\n' : ''}daemon off;
worker_processes 1;
pid ${work}/nginx.pid;
error_log ${work}/error.log;
events {}
http {
  access_log off;
  client_body_temp_path ${work}/body;
  proxy_temp_path ${work}/proxy;
  fastcgi_temp_path ${work}/fastcgi;
  uwsgi_temp_path ${work}/uwsgi;
  scgi_temp_path ${work}/scgi;
${http(work)}
}
`,
  );
  const child: ChildProcess = spawn(NGINX, ['-p', work, '-c', path.join(work, 'nginx.conf')], { stdio: 'ignore' });
  const stop = () => {
    child.kill('SIGQUIT');
    fs.rmSync(work, { recursive: true, force: true });
  };
  for (let i = 0; i < 100; i++) {
    if (await answers(port)) return { work, stop };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const log = fs.readFileSync(path.join(work, 'error.log'), 'utf8');
  stop();
  throw new Error(`nginx did not listen on ${port}: ${log}`);
}
