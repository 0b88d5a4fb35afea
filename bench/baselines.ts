// The baselines Berth is measured against, run as their own processes:
//   node bench/baselines.ts node <port> <dir>       a bare Node http server answering /<name> with the
//                                                    bytes of <dir>/<name>, held in memory
//   node bench/baselines.ts https <port> <dir> <cert> <key>
//                                                    the same over HTTPS (node:https), with the PEM
//                                                    chain and key in those files
//   node bench/baselines.ts sqlite <port> <db file>  a bare Node http server answering every request with
//                                                    the bench statement run on SQLite directly, in the
//                                                    envelope of Berth's query endpoint
//   node bench/baselines.ts upload <port> <dir>      a bare Node http server storing each PUT /<name>:
//                                                    the body written to a new file in <dir>/files,
//                                                    fsynced, and one row inserted into <dir>/meta.sqlite
//                                                    (WAL, synchronous FULL, as Berth's metadata);
//                                                    GET /<name> reads a stored file back
// The Deno baseline is `deno serve` of bench/hello-deno.ts.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import Database from 'better-sqlite3';

export const BENCH_STATEMENT = { sql: 'SELECT v FROM kv WHERE k = ?', params: ['hello'] };

const [, , kind, port, target, certFile, keyFile] = process.argv;

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
  const statement = new Database(file, { readonly: true }).prepare(BENCH_STATEMENT.sql);
  return (req, res) => {
    req.resume();
    const started = performance.now();
    let status = 200;
    let answer: unknown;
    try {
      const rows = statement.all(...BENCH_STATEMENT.params);
      const duration = Math.round((performance.now() - started) * 1000) / 1000;
      answer = {
        success: true,
        errors: [],
        messages: [],
        result: [{ success: true, results: rows, meta: { duration, changes: 0, last_row_id: null } }],
      };
    } catch (err) {
      status = 500;
      answer = {
        success: false,
        errors: [{ code: 'statement_failed', message: (err as Error).message }],
        messages: [],
        result: [],
      };
    }
    const body = JSON.stringify(answer);
    res
      .writeHead(status, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
      })
      .end(body);
  };
}

const FILE_NAME = /^\/([A-Za-z0-9._-]{1,200})$/;

function serveUploads(dir: string): http.RequestListener {
  const filesDir = path.join(dir, 'files');
  fs.mkdirSync(filesDir, { recursive: true });
  const db = new Database(path.join(dir, 'meta.sqlite'));
  db.exec(
    `PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
     CREATE TABLE IF NOT EXISTS files (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, bytes INTEGER NOT NULL, created_at INTEGER NOT NULL)`,
  );
  const insert = db.prepare('INSERT INTO files (name, bytes, created_at) VALUES (?, ?, ?)');
  const answer = (res: http.ServerResponse, status: number, value: unknown) => {
    const body = JSON.stringify(value);
    res
      .writeHead(status, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
      })
      .end(body);
  };
  return (req, res) => {
    const name = FILE_NAME.exec(req.url ?? '')?.[1];
    if (!name) {
      req.resume();
      return answer(res, 404, { error: 'not found' });
    }
    const file = path.join(filesDir, name);
    if (req.method === 'GET') {
      fs.readFile(file, (err, bytes) => {
        if (err) return answer(res, 404, { error: 'not found' });
        res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': bytes.length }).end(bytes);
      });
      return;
    }
    if (req.method !== 'PUT') {
      req.resume();
      return answer(res, 405, { error: 'method not allowed' });
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const bytes = Buffer.concat(chunks);
      const fail = (err: Error) => answer(res, 500, { error: err.message });
      // A new file, its bytes written and fsynced, then one row: as a durable store needs at the least.
      fs.open(file, 'wx', 0o600, (err, fd) => {
        if (err) return fail(err);
        fs.write(fd, bytes, 0, bytes.length, 0, (err) => {
          if (err) return fs.close(fd, () => fail(err));
          fs.fsync(fd, (err) => {
            fs.close(fd, (closeErr) => {
              if (err || closeErr) return fail((err ?? closeErr)!);
              try {
                insert.run(name, bytes.length, Date.now());
              } catch (err) {
                return fail(err as Error);
              }
              answer(res, 200, { name, bytes: bytes.length });
            });
          });
        });
      });
    });
  };
}

if (import.meta.filename === process.argv[1]) {
  const kinds = ['node', 'https', 'sqlite', 'upload'];
  if (!kind || !kinds.includes(kind) || !port || !target || (kind === 'https' && (!certFile || !keyFile))) {
    process.stderr.write(
      'usage: node bench/baselines.ts node|sqlite|upload <port> <dir|db file|dir>\n' +
        '       node bench/baselines.ts https <port> <dir> <cert file> <key file>\n',
    );
    process.exit(2);
  }
  const listener =
    kind === 'node' || kind === 'https'
      ? serveFiles(target)
      : kind === 'sqlite'
        ? serveStatement(target)
        : serveUploads(target);
  const server =
    kind === 'https'
      ? https.createServer({ cert: fs.readFileSync(certFile!), key: fs.readFileSync(keyFile!) }, listener)
      : http.createServer(listener);
  server.listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'));
}
