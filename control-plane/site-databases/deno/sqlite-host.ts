// One site's database, served to Berth from a Deno process of its own (see ../local-provider.ts).
// Tenant SQL runs here, confined by SQLite itself: an authorizer that refuses ATTACH, extension
// loading, transactions Berth does not own and every pragma outside a short list; defensive mode
// (no writable_schema, no schema_version writes); limits (no attached database, bounded strings);
// temporary storage in memory under a hard heap limit. Deno's permissions let the process open
// nothing but its site's folder. Requests arrive on stdin and are answered in order on stdout.
import { DatabaseSync, type StatementSync, constants } from 'node:sqlite';
import {
  FrameReader,
  decodeJson,
  encodeFrame,
  encodeJson,
  joinBytes,
  writeAllSync,
} from '../../../runtime-host/protocol.ts';
import {
  type Access,
  type DbRequest,
  type FailureReason,
  type Mode,
  type Statement,
  DbFrame,
  LEDGER_DDL,
  LEDGER_TABLE,
  MAX_DB_FRAME_BYTES,
  MAX_RESULT_BYTES,
} from '../protocol.ts';
import { leaveStoppingToTheHost } from '../../../deno-shim/signals.ts';
import { DbLines } from './db-lines.ts';

leaveStoppingToTheHost();

const [file, heapLimit, maxBytes, replication, linePath] = Deno.args;
if (!file || !heapLimit || !maxBytes || (replication !== 'replicated' && replication !== 'alone') || !linePath)
  throw new Error(
    'usage: sqlite-host.ts <database file> <sqlite heap limit bytes> <database size limit bytes> replicated|alone ' +
      '<line socket>|none',
  );
/** The replicator (Litestream) follows this database's write-ahead log, and checkpoints it itself. */
const replicated = replication === 'replicated';
/** The replicator's own tables in the database, made here as it makes them, and out of tenants' reach. */
const REPLICATOR_DDL =
  'CREATE TABLE IF NOT EXISTS _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER); CREATE TABLE IF NOT EXISTS _litestream_lock (id INTEGER);';
const REPLICATOR_TABLES = '_litestream_';

// Deno 2.9 implements these parts of node:sqlite; its bundled Node types predate them.
type Action =
  | 'OK'
  | 'DENY'
  | 'ATTACH'
  | 'DETACH'
  | 'TRANSACTION'
  | 'SAVEPOINT'
  | 'PRAGMA'
  | 'FUNCTION'
  | 'CREATE_VTABLE'
  | 'DROP_VTABLE'
  | 'CREATE_TABLE'
  | 'DELETE'
  | 'DROP_TABLE'
  | 'INSERT'
  | 'READ'
  | 'UPDATE'
  | 'ANALYZE'
  | 'CREATE_INDEX'
  | 'CREATE_TRIGGER'
  | 'DROP_INDEX'
  | 'DROP_TRIGGER'
  | 'ALTER_TABLE'
  | 'SELECT'
  | 'RECURSIVE';
const C = constants as unknown as Record<`SQLITE_${Action}`, number>;
interface ConfinableDatabase {
  enableDefensive(active: boolean): void;
  setAuthorizer(
    callback: (
      action: number,
      a1: string | null,
      a2: string | null,
      db: string | null,
      source: string | null,
    ) => number,
  ): void;
  limits: { attach: number; length: number; sqlLength: number };
}

/** A statement refused or failed, with the reason Berth maps to its own error codes. */
class Failure extends Error {
  constructor(
    readonly reason: FailureReason,
    message: string,
  ) {
    super(message);
  }
}

/** Pragmas that only describe the schema or check it: any argument is fine. */
const INTROSPECTION = new Set([
  'table_info',
  'table_xinfo',
  'table_list',
  'index_list',
  'index_info',
  'index_xinfo',
  'foreign_key_list',
  'foreign_key_check',
  'integrity_check',
  'quick_check',
  'collation_list',
  'function_list',
  'module_list',
  'pragma_list',
  'compile_options',
]);
/** Pragmas that may be read but not set: setting them changes how or where data is stored. */
const READABLE = new Set([
  'page_count',
  'page_size',
  'freelist_count',
  'encoding',
  'schema_version',
  'data_version',
  'journal_mode',
  'auto_vacuum',
  'synchronous',
  'cache_size',
  'max_page_count',
  'busy_timeout',
]);
/** Pragmas that may be set: they change this database's own contents or this connection's checks. */
const SETTABLE = new Set([
  'user_version',
  'application_id',
  'foreign_keys',
  'defer_foreign_keys',
  'recursive_triggers',
  'optimize',
]);
/** `argument` is set both for assignments and for a pragma's own argument, as in table_info(t). */
const pragmaAllowed = (name: string, argument: boolean) =>
  INTROSPECTION.has(name) || SETTABLE.has(name) || (READABLE.has(name) && !argument);

/** A table-valued pragma (pragma_table_info) runs its pragma as it is read: one of these only reads. */
const pragmaOnlyReads = (name: string, argument: boolean) =>
  INTROSPECTION.has(name) || (READABLE.has(name) && !argument);

/** Virtual table modules a site may create: full-text search and R-trees. */
const MODULES = new Set(['fts5', 'fts4', 'fts3', 'rtree', 'rtree_i32']);
/** Functions that reach outside the database. */
const FUNCTIONS_DENIED = new Set(['load_extension', 'fts3_tokenizer']);

/** Actions whose first argument names a table, and those whose second does. */
const TABLE_FIRST = new Set([
  C.SQLITE_CREATE_TABLE,
  C.SQLITE_DELETE,
  C.SQLITE_DROP_TABLE,
  C.SQLITE_INSERT,
  C.SQLITE_READ,
  C.SQLITE_UPDATE,
  C.SQLITE_ANALYZE,
  C.SQLITE_CREATE_VTABLE,
  C.SQLITE_DROP_VTABLE,
]);
const TABLE_SECOND = new Set([
  C.SQLITE_CREATE_INDEX,
  C.SQLITE_CREATE_TRIGGER,
  C.SQLITE_DROP_INDEX,
  C.SQLITE_DROP_TRIGGER,
  C.SQLITE_ALTER_TABLE,
]);

/** Whose SQL is running; Berth's own ('system') unless confined() says otherwise. */
let mode: Mode = 'system';
/** Why the authorizer last said no, so the error can say it better than "not authorized". */
let denial: Failure | null = null;
/**
 * Actions that only read. A statement of the tenant's that SQLite asked about a SELECT and nothing but
 * these while preparing it cannot write. (A SELECT is required: VACUUM asks nothing while prepared,
 * and its writes only when it runs.)
 */
const READING = new Set([C.SQLITE_SELECT, C.SQLITE_READ, C.SQLITE_FUNCTION, C.SQLITE_RECURSIVE]);
/** What the authorizer was asked while a tenant's statement was prepared: a SELECT, and anything beyond reading. */
let askedSelect = false;
let beyondReading = false;
/**
 * Set while a statement asked to only read is prepared and run: anything beyond reading (save the
 * pragmas a table-valued pragma runs to read) is refused as SQLite asks, before it takes effect (a flag
 * pragma such as foreign_keys applies while it is prepared).
 */
let readingOnly = false;

const READS_ONLY = 'this query is read-only: it may only read (SELECT, or WITH … SELECT), and writes nothing';

function deny(reason: FailureReason, message: string): number {
  denial = new Failure(reason, message);
  return C.SQLITE_DENY;
}

/**
 * The authorizer. `source` names the trigger or view an action comes from: those are the tenant's
 * SQL even inside Berth's own statements (a trigger on the ledger fires on a receipt), so they get
 * no more than the tenant's own rights.
 */
function authorize(
  action: number,
  a1: string | null,
  a2: string | null,
  _db: string | null,
  source: string | null,
): number {
  const as: Mode = mode === 'system' && source !== null ? 'api' : mode;
  if (as === 'system') return C.SQLITE_OK;
  if (action === C.SQLITE_SELECT) askedSelect = true;
  else if (!READING.has(action)) {
    beyondReading = true;
    if (readingOnly && !(action === C.SQLITE_PRAGMA && pragmaOnlyReads((a1 ?? '').toLowerCase(), a2 !== null)))
      return deny('denied', READS_ONLY);
  }
  switch (action) {
    case C.SQLITE_ATTACH:
    case C.SQLITE_DETACH:
      return deny('denied', 'ATTACH, DETACH and VACUUM are not available: a site database cannot open other files');
    case C.SQLITE_TRANSACTION:
    case C.SQLITE_SAVEPOINT:
      return deny(
        'denied',
        'transactions are managed by Berth: every statement is atomic, and a batch runs as one transaction',
      );
    case C.SQLITE_PRAGMA: {
      const name = (a1 ?? '').toLowerCase();
      if (pragmaAllowed(name, a2 !== null)) return C.SQLITE_OK;
      return deny('denied', `PRAGMA ${name}${a2 === null ? '' : ' = …'} is not available on site databases`);
    }
    case C.SQLITE_READ: {
      // A table-valued pragma (pragma_database_list) is read like a table; only this check knows
      // the trigger or view it is read from.
      const name = (a1 ?? '').toLowerCase();
      if (name.startsWith('pragma_') && !pragmaAllowed(name.slice('pragma_'.length), false)) {
        return deny('denied', `${name} is not available on site databases`);
      }
      break;
    }
    case C.SQLITE_FUNCTION:
      if (FUNCTIONS_DENIED.has((a2 ?? '').toLowerCase()))
        return deny('denied', `${a2}() is not available on site databases`);
      return C.SQLITE_OK;
    case C.SQLITE_CREATE_VTABLE:
    case C.SQLITE_DROP_VTABLE:
      if (!MODULES.has((a2 ?? '').toLowerCase()))
        return deny('denied', `virtual tables of module ${a2} are not available; fts5, fts4, fts3 and rtree are`);
  }
  const table = TABLE_FIRST.has(action) ? a1 : TABLE_SECOND.has(action) ? a2 : null;
  if (as !== 'api' && table?.toLowerCase() === LEDGER_TABLE) {
    return deny('reserved', `${LEDGER_TABLE} is reserved for migrations`);
  }
  if (table?.toLowerCase().startsWith(REPLICATOR_TABLES)) {
    return deny('reserved', `tables named ${REPLICATOR_TABLES}… belong to the database's replication`);
  }
  return C.SQLITE_OK;
}

const db = new DatabaseSync(file, { enableForeignKeyConstraints: true, timeout: 5000 });
const pragma = <T>(sql: string): T => Object.values(db.prepare(`PRAGMA ${sql}`).get() as Record<string, T>)[0]!;
// A new database gets incremental auto-vacuum, so the pages its deleted rows free can be given back
// to the disk (see reclaim); it can only be chosen before the first page is written.
if (pragma<number>('page_count') === 0) db.exec('PRAGMA auto_vacuum = INCREMENTAL');
db.exec(
  `PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA temp_store = MEMORY; PRAGMA hard_heap_limit = ${Number(heapLimit)};`,
);
// The size limit is SQLite's own: a write that needs a page past it fails with SQLITE_FULL and is
// rolled back. Tenants may read max_page_count but not set it (see READABLE).
const pageSize = pragma<number>('page_size');
db.exec(`PRAGMA max_page_count = ${Math.max(1, Math.floor(Number(maxBytes) / pageSize))}`);
db.exec(LEDGER_DDL);
// The replicator copies the log before SQLite folds it into the file, so it alone checkpoints; its
// tables exist before any tenant statement, so none can take their names.
if (replicated) db.exec(`PRAGMA wal_autocheckpoint = 0; ${REPLICATOR_DDL}`);
const confinable = db as unknown as ConfinableDatabase;
confinable.enableDefensive(true);
confinable.limits.attach = 0;
confinable.limits.length = 64 * 1024 * 1024;
confinable.limits.sqlLength = 16 * 1024 * 1024;
confinable.setAuthorizer(authorize);

/** Rows the statements run so far changed, committed or not: a line's call that changed some wrote. */
let changed = 0;

/** Berth's own statement, prepared once. */
const counters = db.prepare('SELECT total_changes() AS n, last_insert_rowid() AS id');

/**
 * Runs `work` under the authorizer's rules for `as`. A refusal can come while a statement is prepared
 * or while it runs (table-valued pragmas): either way the error says why.
 */
function confined<T>(as: Mode, work: () => T): T {
  mode = as;
  denial = null;
  try {
    return work();
  } catch (err) {
    throw denial ?? err;
  } finally {
    mode = 'system';
  }
}

function encodeValue(column: string, value: unknown): string {
  if (typeof value === 'bigint') {
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new Failure(
        'failed',
        `column "${column}" holds an integer beyond 2^53 that would lose precision; select it with CAST(${column} AS TEXT)`,
      );
    }
    return String(value);
  }
  if (value instanceof Uint8Array) return JSON.stringify({ $blob: toBase64(value) });
  return JSON.stringify(value);
}

function toBase64(bytes: Uint8Array): string {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

const bind = (params: Statement['params']) => params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p));

/**
 * Statements prepared once, by whose they are and their SQL text: the authorizer's verdict depends on
 * nothing else, and SQLite asks it again whenever a schema change makes it prepare one anew. The 64
 * most recently used are kept, none longer than 4 KiB of SQL. `reads` is set when, as SQLite
 * prepared the statement, the authorizer was asked about reading and nothing else.
 */
interface Prepared {
  query: StatementSync;
  reads: boolean;
}
const preparedStatements = new Map<string, Prepared>();
const CACHED_STATEMENTS = 64;
const CACHED_SQL_LENGTH = 4096;

function prepared(sql: string, as: Mode): Prepared {
  const key = `${as}\n${sql}`;
  let statement = preparedStatements.get(key);
  if (statement) {
    preparedStatements.delete(key);
  } else {
    askedSelect = false;
    beyondReading = false;
    const query = db.prepare(sql);
    query.setReadBigInts(true);
    statement = { query, reads: as !== 'system' && askedSelect && !beyondReading };
    if (sql.length > CACHED_SQL_LENGTH) return statement;
  }
  preparedStatements.set(key, statement);
  if (preparedStatements.size > CACHED_STATEMENTS) preparedStatements.delete(preparedStatements.keys().next().value!);
  return statement;
}

/** A row's size as JSON, roughly and never much below it: what measure() adds up. */
function estimatedBytes(row: Record<string, unknown>): number {
  let bytes = 2;
  for (const column in row) {
    const value = row[column];
    bytes += column.length + 4;
    if (typeof value === 'string') bytes += value.length;
    else if (value instanceof Uint8Array) bytes += Math.ceil(value.length / 3) * 4 + 12;
    else bytes += 24;
  }
  return bytes;
}

const MEASURE = {
  begin: db.prepare('SAVEPOINT berth_measure'),
  undo: db.prepare('ROLLBACK TO berth_measure'),
  end: db.prepare('RELEASE berth_measure'),
};

/**
 * Streams a statement's rows once, keeping none, and refuses it as too large as soon as they pass the
 * cap: all(), which reports errors, builds every row at once, and a result of millions of rows would
 * stop this process at its heap limit. Whatever a statement that may write wrote is undone; it runs
 * again for real. (iterate() alone will not do: Deno 2.9's ends quietly on an error instead of throwing it.)
 */
function measure({ query, reads }: Prepared, params: ReturnType<typeof bind>, as: Mode): void {
  const rows = () =>
    confined(as, () => {
      let bytes = 0;
      for (const row of query.iterate(...params)) {
        bytes += estimatedBytes(row as Record<string, unknown>);
        if (bytes > MAX_RESULT_BYTES) throw tooLarge();
      }
    });
  if (reads) {
    rows();
    return;
  }
  // The savepoint is Berth's own statement, run outside the tenant's rights; the rows are the tenant's.
  MEASURE.begin.run();
  try {
    rows();
  } finally {
    MEASURE.undo.run();
    MEASURE.end.run();
  }
}

const tooLarge = () =>
  new Failure('too_large', `the result is larger than ${MAX_RESULT_BYTES} bytes; select fewer rows or columns`);

/**
 * Runs one statement and returns its outcome as JSON text, each row serialised once. A statement that
 * returns rows is measured first (see measure), so a result past the cap is refused before it is built.
 * One that only reads changes nothing, so the counters of changes are not asked.
 */
function execute(
  statement: Statement,
  as: Mode,
  statementOf = confined(as, () => prepared(statement.sql, as)),
): string {
  const started = performance.now();
  const { query, reads } = statementOf;
  const before = reads ? 0 : (counters.get() as { n: number }).n;
  const params = bind(statement.params);
  if (query.columns().length > 0) measure(statementOf, params, as);
  const read = confined(as, () => query.all(...params));
  const rows: string[] = [];
  let bytes = 0;
  for (const row of read) {
    const fields = Object.entries(row as Record<string, unknown>).map(
      ([column, value]) => `${JSON.stringify(column)}:${encodeValue(column, value)}`,
    );
    const text = `{${fields.join(',')}}`;
    bytes += text.length;
    if (bytes > MAX_RESULT_BYTES) throw tooLarge();
    rows.push(text);
  }
  const after = reads ? { n: 0, id: 0 } : (counters.get() as { n: number; id: number });
  const changes = after.n - before;
  changed += changes;
  const lastRowId = changes > 0 ? after.id : null;
  return `{"rows":[${rows.join(',')}],"changes":${changes},"lastRowId":${lastRowId},"durationMs":${performance.now() - started}}`;
}

const BEGIN = { deferred: db.prepare('BEGIN'), immediate: db.prepare('BEGIN IMMEDIATE') };
const COMMIT = db.prepare('COMMIT');
const ROLLBACK = db.prepare('ROLLBACK');

/** Runs `work` in one transaction: committed whole, or rolled back whole. */
function transaction<T>(begin: keyof typeof BEGIN, work: () => T): T {
  BEGIN[begin].run();
  try {
    const result = work();
    COMMIT.run();
    return result;
  } catch (err) {
    if (db.isTransaction) ROLLBACK.run();
    throw err;
  }
}

/** Free pages are given back to the disk after a write once they are this many (1 MiB of 4 KiB pages), or a quarter of the database. */
const RECLAIM_PAGES = 256;
const INCREMENTAL_VACUUM = db.prepare('PRAGMA incremental_vacuum');
const FREELIST_COUNT = db.prepare('PRAGMA freelist_count');

/**
 * Gives the free pages deleted rows and dropped tables left back to the disk, in their own transaction
 * after the tenant's has committed. Databases made before incremental auto-vacuum keep theirs until
 * they are compacted (../sqlite-compact.ts).
 */
function reclaim(): void {
  // Most statements leave no free page: one statement prepared once says so (SQLite reads the count
  // when it runs), before the pragmas that are prepared each time.
  const free = (FREELIST_COUNT.get() as { freelist_count: number }).freelist_count;
  if (free === 0 || pragma<number>('auto_vacuum') !== 2) return;
  if (free < Math.min(RECLAIM_PAGES, pragma<number>('page_count') / 4)) return;
  // Each step moves pages; all() steps until every free page is gone. The checkpoint then writes the
  // moved pages back and truncates both the file and its write-ahead log.
  INCREMENTAL_VACUUM.all();
  if (!replicated) db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
}

const sizeBytes = () => pragma<number>('page_count') * pageSize;

const encoder = new TextEncoder();
const DUMP_PAGE_ROWS = 1000;
const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Writes SQL text that rebuilds the schema and data in an empty database, in pieces. */
function dump(send: (chunk: Uint8Array) => void): number {
  let bytes = 0;
  let buffered: string[] = [];
  let size = 0;
  const line = (text: string) => {
    buffered.push(text, '\n');
    size += text.length + 1;
    if (size >= 256 * 1024) flush();
  };
  const flush = () => {
    if (size === 0) return;
    const chunk = encoder.encode(buffered.join(''));
    bytes += chunk.length;
    send(chunk);
    buffered = [];
    size = 0;
  };
  transaction('deferred', () => {
    const all = (sql: string) => db.prepare(sql).all() as Array<Record<string, string>>;
    const objects = all(
      "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\' ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, rowid",
    ) as Array<{ type: string; name: string; sql: string }>;
    line('PRAGMA foreign_keys = OFF;');
    line('BEGIN TRANSACTION;');
    for (const table of objects.filter((o) => o.type === 'table')) {
      line(`${table.sql};`);
      const columns = all(`PRAGMA table_info(${quote(table.name)})`).map((c) => quote(String(c.name)));
      if (columns.length === 0) continue;
      // quote() renders each value as an exact SQL literal: integers past 2^53, reals and blobs included.
      const values = columns.map((c) => `quote(${c})`).join(" || ',' || ");
      // Pages of rows, so a large table never sits in memory whole: by rowid where the table has
      // one, by position (slower) for WITHOUT ROWID tables.
      const withoutRowid = Boolean(
        (
          db.prepare('SELECT wr FROM pragma_table_list WHERE schema = ? AND name = ?').get('main', table.name) as
            | { wr: number }
            | undefined
        )?.wr,
      );
      const page = withoutRowid
        ? db.prepare(`SELECT NULL AS r, ${values} AS v FROM ${quote(table.name)} LIMIT ${DUMP_PAGE_ROWS} OFFSET ?`)
        : db.prepare(
            `SELECT _rowid_ AS r, ${values} AS v FROM ${quote(table.name)} WHERE _rowid_ > ? ORDER BY _rowid_ LIMIT ${DUMP_PAGE_ROWS}`,
          );
      page.setReadBigInts(true);
      for (let after: bigint | number = withoutRowid ? 0 : -(2n ** 63n); ; ) {
        const rows = page.all(after) as Array<{ r: bigint | null; v: string }>;
        for (const row of rows) line(`INSERT INTO ${quote(table.name)} (${columns.join(', ')}) VALUES (${row.v});`);
        if (rows.length < DUMP_PAGE_ROWS) break;
        after = withoutRowid ? Number(after) + rows.length : rows[rows.length - 1]!.r!;
      }
    }
    for (const other of objects.filter((o) => o.type !== 'table')) line(`${other.sql};`);
    line('COMMIT;');
  });
  flush();
  return bytes;
}

const SQLITE_READONLY = 8;

const paused = () => new Failure('read_only', 'writes to this database are paused');
const readsOnly = () => new Failure('denied', READS_ONLY);

/**
 * Runs `work` with writes refused by SQLite itself (query_only): a statement that would write fails
 * before it changes anything, as `refusal` says. A batch then begins as a reader, since BEGIN
 * IMMEDIATE is a write.
 */
function readOnly<T>(work: () => T, refusal = paused): T {
  // exec, not a statement prepared once: SQLite sets a flag pragma while it prepares the statement.
  db.exec('PRAGMA query_only = 1');
  try {
    return work();
  } catch (err) {
    if ((err as { errcode?: unknown } | null)?.errcode === SQLITE_READONLY) throw refusal();
    throw err;
  } finally {
    db.exec('PRAGMA query_only = 0');
  }
}

/**
 * Every table's rows counted, after SQLite's own check of the whole file. The replicator's tables are
 * left out, as from a dump: their rows are its bookkeeping on this node, written when it gets to them.
 */
function census(): string {
  const integrity = (db.prepare('PRAGMA integrity_check(20)').all() as Array<Record<string, string>>)
    .map((row) => Object.values(row)[0])
    .join('; ');
  const tables: Record<string, number> = {};
  transaction('deferred', () => {
    const names = db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\' ORDER BY name",
      )
      .all() as Array<{ name: string }>;
    for (const { name } of names)
      tables[name] = Number((db.prepare(`SELECT count(*) AS n FROM ${quote(name)}`).get() as { n: number }).n);
  });
  return JSON.stringify({ integrity, tables });
}

/**
 * Runs a statement asked to only read. The authorizer refuses anything beyond reading as the statement
 * is prepared (no write, no pragma); one prepared before for another call must have been found to only
 * read then; and SQLite's own query_only stands behind both while it runs.
 */
function onlyReading(statement: Statement, as: Access): string {
  readingOnly = true;
  try {
    const statementOf = confined(as, () => prepared(statement.sql, as));
    if (!statementOf.reads) throw readsOnly();
    return readOnly(() => transaction('deferred', () => execute(statement, as, statementOf)), readsOnly);
  } finally {
    readingOnly = false;
  }
}

function handle(request: DbRequest, stream: number): string {
  switch (request.op) {
    case 'run': {
      if (request.readsOnly) return onlyReading(request.statement, request.access);
      if (request.readOnly)
        return readOnly(() => transaction('deferred', () => execute(request.statement, request.access)));
      // A statement that only reads needs no transaction of its own (SQLite reads in one) and leaves
      // nothing to reclaim; this process is the database's only writer.
      const statementOf = confined(request.access, () => prepared(request.statement.sql, request.access));
      if (statementOf.reads) return execute(request.statement, request.access, statementOf);
      const outcome = transaction('deferred', () => execute(request.statement, request.access, statementOf));
      reclaim();
      return outcome;
    }
    case 'batch': {
      const all = () => `[${request.statements.map((s) => execute(s, request.access)).join(',')}]`;
      if (request.readOnly) return readOnly(() => transaction('deferred', all));
      const outcome = transaction('immediate', all);
      reclaim();
      return outcome;
    }
    case 'checkpoint': {
      const { busy } = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number };
      if (busy !== 0) throw new Failure('failed', 'the write-ahead log could not be checkpointed');
      return 'null';
    }
    case 'census':
      return census();
    case 'migrate':
      transaction('immediate', () => {
        confined('migration', () => db.exec(request.sql));
        execute(request.receipt, 'system');
      });
      reclaim();
      return 'null';

    case 'dump':
      return JSON.stringify({ bytes: dump((chunk) => write(encodeFrame(DbFrame.DumpChunk, stream, chunk))) });
    case 'connect':
      throw new Failure('failed', 'a line is connected between requests');
    case 'ping':
      reportLines();
      return 'null';
    case 'close-lines':
      void lines?.closeAll();
      reportLines();
      return 'null';
  }
}

/** Answers to the frames of one chunk of stdin, written together. */
let answers: Uint8Array[] = [];

/** Writes the answers so far; Berth reads frames in the order of its requests. */
function flush(): void {
  if (answers.length === 0) return;
  const pending = answers;
  answers = [];
  writeAllSync(Deno.stdout, joinBytes(pending));
}

function write(bytes: Uint8Array): void {
  flush();
  writeAllSync(Deno.stdout, bytes);
}

function answer(stream: number, payload: Uint8Array): void {
  answers.push(encodeFrame(DbFrame.Result, stream, payload));
}

const SQLITE_FULL = 13;

/** SQLite's own error as a Failure: a write past the size limit is `full`, anything else `failed`. */
function fromSqlite(err: unknown): Failure {
  if ((err as { errcode?: unknown } | null)?.errcode === SQLITE_FULL) {
    return new Failure(
      'full',
      `the database is full: it may grow to ${Number(maxBytes)} bytes and holds ${sizeBytes()}; nothing of this write was kept. Delete rows (the space they free is reused), or ask the operator for a higher limit`,
    );
  }
  return new Failure('failed', err instanceof Error ? err.message : String(err));
}

/** A request's outcome as a DbResult's JSON. */
function outcome(request: DbRequest, stream: number): { text: string; ok: boolean } {
  try {
    return { text: `{"ok":true,"value":${handle(request, stream)}}`, ok: true };
  } catch (err) {
    const failure = err instanceof Failure ? err : fromSqlite(err);
    return {
      text: JSON.stringify({ ok: false, error: { reason: failure.reason, message: failure.message } }),
      ok: false,
    };
  }
}

function serve(stream: number, request: DbRequest): void {
  answer(stream, encoder.encode(outcome(request, stream).text));
}

/**
 * A worker's ctx.db call on its line, run as the host runs it: one statement alone, several as a
 * batch, always as the function's. `wrote`: it succeeded and changed rows, which replication hears of.
 */
function runForFunction(statements: Statement[]): { answer: string; ok: boolean; wrote: boolean } {
  const before = changed;
  const request: DbRequest =
    statements.length === 1
      ? { op: 'run', access: 'function', statement: statements[0]! }
      : { op: 'batch', access: 'function', statements };
  const { text, ok } = outcome(request, 0);
  return { answer: text, ok, wrote: ok && changed !== before };
}

const lines = linePath === 'none' ? null : new DbLines(linePath, runForFunction);

/** Tells the host what the lines did, before the answer it comes with. */
function reportLines(): void {
  const stats = lines?.takeStats();
  if (stats) answers.push(encodeFrame(DbFrame.Stats, 0, encodeJson(stats)));
}

write(encodeFrame(DbFrame.Ready, 0));
/** Connects a worker's line, between two requests; answered once the worker has been said Hello. */
async function connect(stream: number, token: string): Promise<void> {
  try {
    if (!lines) throw new Failure('denied', 'this process serves no line');
    await lines.connect(token);
    answer(stream, encoder.encode('{"ok":true,"value":null}'));
  } catch (err) {
    const failure = err instanceof Failure ? err : new Failure('failed', (err as Error).message);
    answer(stream, encodeJson({ ok: false, error: { reason: failure.reason, message: failure.message } }));
  }
}

const reader = new FrameReader((type) => (type === DbFrame.Request ? MAX_DB_FRAME_BYTES : 0));
for await (const chunk of Deno.stdin.readable) {
  for (const frame of reader.push(chunk)) {
    const request = decodeJson<DbRequest>(frame.payload);
    if (request.op === 'connect') {
      flush();
      await connect(frame.stream, request.token);
    } else serve(frame.stream, request);
  }
  flush();
}
// Berth closed its end: the workers' lines close (their calls not answered were not run, and go to
// Berth), what they did is reported, and the database closes, which checkpoints the WAL into it.
const closing = lines?.closeAll();
reportLines();
flush();
await closing;
db.close();
