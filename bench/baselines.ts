// The baselines Berth is measured against, run as their own processes:
//   node bench/baselines.ts node <port> <dir>       a bare Node http server answering /<name> with the
//                                                    bytes of <dir>/<name>, held in memory
//   node bench/baselines.ts sqlite <port> <db file>  a bare Node http server answering every request with
//                                                    the bench statement run on SQLite directly
// The Deno baseline is `deno serve` of bench/hello-deno.ts.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import sqlite3 from 'sqlite3';

export const BENCH_STATEMENT = { sql: 'SELECT v FROM kv WHERE k = ?', params: ['hello'] };

const [, , kind, port, target] = process.argv;

function serveFiles(dir: string): http.RequestListener {
  const files = new Map(fs.readdirSync(dir).map((name) => [`/${name}`, fs.readFileSync(path.join(dir, name))]));
  return (req, res) => {
    const body = files.get(req.url ?? '');
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length }).end(body);
  };
}

function serveStatement(file: string): http.RequestListener {
  const db = new sqlite3.Database(file, sqlite3.OPEN_READONLY);
  return (req, res) => {
    req.resume();
    db.get(BENCH_STATEMENT.sql, BENCH_STATEMENT.params, (err, row) => {
      const body = JSON.stringify(err ? { error: err.message } : { results: [row] });
      res.writeHead(err ? 500 : 200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
    });
  };
}

if (import.meta.filename === process.argv[1]) {
  if ((kind !== 'node' && kind !== 'sqlite') || !port || !target) {
    process.stderr.write('usage: node bench/baselines.ts node|sqlite <port> <dir|db file>\n');
    process.exit(2);
  }
  http.createServer(kind === 'node' ? serveFiles(target) : serveStatement(target)).listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'));
}
