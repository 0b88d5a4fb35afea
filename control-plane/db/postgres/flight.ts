// Statements sent to PostgreSQL together and answered together: one round trip however many there are.
// A flight is one `pg` query of its own (a Submittable): each statement is a Bind and an Execute of a
// prepared statement, and one Sync ends them all. PostgreSQL runs them in order, each with a snapshot of
// its own as if sent alone; the first that fails makes it skip the rest up to the Sync, so nothing after
// a failure runs (not even outside a transaction that a failed BEGIN did not open). The answers come back
// in one piece, after the last statement.
//
// Each connection prepares a statement once: the first flight that sends it on a connection parses and
// describes it there (its columns, read once: the statement names them, see ../hot-sql.ts), and later
// ones only bind and execute it. A statement the connection is not known to have prepared is closed
// before it is parsed (closing what does not exist is no error): a flight given up on before its answers
// came (its deadline passed) may have prepared statements it never heard of.
import type pg from 'pg';

export interface FlightStatement {
  /** The prepared statement's name on every connection, and its text. */
  name: string;
  text: string;
  values: Array<string | number | null | Buffer>;
}

export interface FlightResult {
  command: string;
  rows: Record<string, unknown>[];
  rowCount: number;
}

interface Column {
  name: string;
  parse: (text: string) => unknown;
}

/** What each connection has prepared: a statement's name, and the columns it returns (none for most writes). */
const prepared = new WeakMap<pg.Connection, Map<string, Column[]>>();

/** What PostgreSQL sends back, as `pg` names its messages. */
interface RowDescription {
  fields: Array<{ name: string; dataTypeID: number }>;
}
interface DataRow {
  fields: Array<string | null>;
}
interface CommandComplete {
  text: string;
}

/** A statement's values as the wire takes them: text, or bytes. */
const wireValue = (value: string | number | null | Buffer) => (typeof value === 'number' ? String(value) : value);

/** Sends `statements` as one flight on `client` and resolves with each one's result, in order. */
export function sendFlight(
  client: pg.ClientBase,
  types: pg.CustomTypesConfig,
  statements: FlightStatement[],
): Promise<FlightResult[]> {
  return new Promise((resolve, reject) => {
    client.query(new Flight(types, statements, resolve, reject));
  });
}

class Flight implements pg.Submittable {
  readonly #results: FlightResult[] = [];
  /** Statements whose description is on its way, in the order they were described. */
  readonly #describing: string[] = [];
  #connection: pg.Connection | undefined;
  #statements: Map<string, Column[]> | undefined;
  #rows: Record<string, unknown>[] = [];
  #done = false;
  readonly #noData = () => this.#described([]);

  constructor(
    readonly types: pg.CustomTypesConfig,
    readonly statements: FlightStatement[],
    resolve: (results: FlightResult[]) => void,
    reject: (err: Error) => void,
  ) {
    // `pg` wraps `callback` to clear its answer deadline when it is called.
    this.callback = (err, results) => (err ? reject(err) : resolve(results!));
  }

  callback: (err: Error | null, results?: FlightResult[]) => void;

  submit(connection: pg.Connection): void {
    this.#connection = connection;
    let statements = prepared.get(connection);
    if (!statements) {
      statements = new Map();
      prepared.set(connection, statements);
    }
    this.#statements = statements;
    // NoData answers a description of a statement that returns no rows; `pg` passes it to no query.
    connection.on('noData', this.#noData);
    connection.stream.cork();
    try {
      const describing = new Set<string>();
      for (const s of this.statements) {
        if (!statements.has(s.name) && !describing.has(s.name)) {
          describing.add(s.name);
          this.#describing.push(s.name);
          connection.close({ type: 'S', name: s.name }, true);
          connection.parse({ name: s.name, text: s.text, types: [] }, true);
          connection.describe({ type: 'S', name: s.name }, true);
        }
        connection.bind({ statement: s.name, values: s.values.map(wireValue) }, true);
        connection.execute({}, true);
      }
      connection.sync();
    } finally {
      connection.stream.uncork();
    }
  }

  #described(columns: Column[]): void {
    const name = this.#describing.shift();
    if (name !== undefined && !this.#done) this.#statements!.set(name, columns);
  }

  handleRowDescription(message: RowDescription): void {
    this.#described(
      message.fields.map((field) => ({ name: field.name, parse: this.types.getTypeParser(field.dataTypeID, 'text') })),
    );
  }

  handleDataRow(message: DataRow): void {
    if (this.#done) return;
    const columns = this.#statements!.get(this.statements[this.#results.length]!.name)!;
    const row: Record<string, unknown> = {};
    message.fields.forEach((value, i) => {
      row[columns[i]!.name] = value === null ? null : columns[i]!.parse(value);
    });
    this.#rows.push(row);
  }

  handleCommandComplete(message: CommandComplete): void {
    const [command = '', ...counts] = message.text.split(' ');
    this.#complete({ command, rows: this.#rows, rowCount: Number(counts.at(-1) ?? 0) });
  }

  handleEmptyQuery(): void {
    this.#complete({ command: '', rows: [], rowCount: 0 });
  }

  #complete(result: FlightResult): void {
    if (this.#done) return;
    this.#results.push(result);
    this.#rows = [];
  }

  handleError(err: Error): void {
    this.#finish(err);
  }

  handleReadyForQuery(): void {
    this.#finish(null);
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(): void {}

  handleCopyData(): void {}

  #finish(err: Error | null): void {
    if (this.#done) return;
    this.#done = true;
    this.#connection?.off('noData', this.#noData);
    this.callback(err, this.#results);
  }
}
