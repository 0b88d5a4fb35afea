// What a command prints. Answers go to stdout, as text or, with --json, as JSON (one document, or one
// line per event for commands that keep running); progress goes to stderr, so stdout stays parseable.
import { ApiError, type CliError } from './cli-error.ts';

interface Stream {
  write(text: string): unknown;
  isTTY?: boolean;
}

export class Output {
  readonly json: boolean;
  readonly #stdout: Stream;
  readonly #stderr: Stream;
  /** A counter line is showing on the terminal and must be cleared before anything else is written. */
  #status = false;

  constructor(json: boolean, stdout: Stream = process.stdout, stderr: Stream = process.stderr) {
    this.json = json;
    this.#stdout = stdout;
    this.#stderr = stderr;
  }

  /** An answer: `value` as JSON with --json, else `text` (nothing when empty). */
  print(value: unknown, text: string): void {
    this.#clearStatus();
    if (this.json) this.#stdout.write(`${JSON.stringify(value)}\n`);
    else if (text) this.#stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** A line of progress on stderr. */
  note(text: string): void {
    this.#clearStatus();
    this.#stderr.write(`${text}\n`);
  }

  /** On a terminal, a line that the next one replaces; elsewhere nothing. */
  status(text: string): void {
    if (!this.#stderr.isTTY) return;
    this.#stderr.write(`\r\x1b[K${text}`);
    this.#status = true;
  }

  get interactive(): boolean {
    return this.#stderr.isTTY === true;
  }

  /** A failure: `berth: <message>` on stderr, or its envelope on stdout with --json. */
  error(err: CliError): void {
    this.#clearStatus();
    if (this.json) {
      this.#stdout.write(
        `${JSON.stringify({ error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } })}\n`,
      );
      return;
    }
    const code = err instanceof ApiError ? ` (${err.code})` : '';
    this.#stderr.write(`berth: ${err.message}${code}\n${err.hint ? `${err.hint}\n` : ''}`);
  }

  #clearStatus(): void {
    if (!this.#status) return;
    this.#stderr.write('\r\x1b[K');
    this.#status = false;
  }
}
