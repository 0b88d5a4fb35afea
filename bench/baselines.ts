// The baselines Berth is measured against, run as their own processes:
//   node bench/baselines.ts node <port> <dir>   a bare Node http server answering /<name> with the
//                                                bytes of <dir>/<name>, held in memory
// The Deno baseline is `deno serve` of bench/hello-deno.ts.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const [, , kind, port, dir] = process.argv;
if (kind !== 'node' || !port || !dir) {
  process.stderr.write('usage: node bench/baselines.ts node <port> <dir>\n');
  process.exit(2);
}
const files = new Map(fs.readdirSync(dir).map((name) => [`/${name}`, fs.readFileSync(path.join(dir, name))]));
http
  .createServer((req, res) => {
    const body = files.get(req.url ?? '');
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length }).end(body);
  })
  .listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'));
