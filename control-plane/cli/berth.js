#!/usr/bin/env node
// The `berth` command. Berth is written in TypeScript and run through tsx, with no build step.
// It runs on Node 24 (or 22.14+). Started by an older Node, it hands itself to the Node 24 that
// `make install` fetched into .tools/, or says how to get one: its SQLite driver and the AWS SDK
// cannot run on the older Node.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
const supported = major >= 24 || (major === 22 && minor >= 14);

if (supported) {
  const { register } = await import('tsx/esm/api');
  register();
  const { main } = await import('./main.ts');
  process.exitCode = await main(process.argv.slice(2));
} else {
  const tools = path.resolve(import.meta.dirname, '../../.tools');
  const fetched = fs.existsSync(tools)
    ? fs
        .readdirSync(tools)
        .filter((name) => /^node-24\.\d+\.\d+$/.test(name))
        .map((name) => path.join(tools, name, 'bin', 'node'))
        .find((file) => fs.existsSync(file))
    : undefined;
  if (!fetched) {
    console.error(
      `berth: Berth needs Node 24 (or 22.14+), and this is Node ${process.versions.node}; ` +
        '`make install` in the Berth checkout fetches Node 24 into .tools/ from the npm registry',
    );
    process.exit(1);
  }
  console.error(
    `berth: this machine's Node is ${process.versions.node}; running on ${path.relative(process.cwd(), fetched) || fetched}`,
  );
  // The child gets the terminal. Ctrl-C reaches it with the rest of the group, so the parent only waits
  // (a second SIGINT would make the server stop at once); SIGTERM and SIGHUP sent to the parent alone are
  // passed on (the server ignores a repeat of those). The child's status becomes the command's.
  const child = spawn(fetched, [...process.execArgv, import.meta.filename, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  process.on('SIGINT', () => {});
  for (const signal of /** @type {const} */ (['SIGTERM', 'SIGHUP'])) process.on(signal, () => child.kill(signal));
  child.once('exit', (code, signal) => process.exit(code ?? 128 + (signal ? os.constants.signals[signal] : 0)));
}
