// The failures a user can cause, each with the exit code and the words it is shown with.
import { EXIT } from './exit-codes.ts';

export interface CliErrorOptions {
  /** Stable and lowercase, as in the API's envelopes; what --json prints. */
  code: string;
  exitCode?: number;
  /** A second line saying what to do about it. */
  hint?: string;
  details?: Record<string, unknown>;
}

/** Shown as `berth: <message>` (and the hint), never with a stack trace. */
export class CliError extends Error {
  readonly code: string;
  readonly exitCode: number;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(message: string, options: CliErrorOptions) {
    super(message);
    this.code = options.code;
    this.exitCode = options.exitCode ?? EXIT.FAILED;
    this.hint = options.hint;
    this.details = options.details;
  }
}

/** An error envelope from the API: shown as `berth: <message> (<code>)`. */
export class ApiError extends CliError {
  readonly status: number;

  constructor(
    status: number,
    envelope: { code: string; message: string; details?: Record<string, unknown> },
    options: Partial<CliErrorOptions> = {},
  ) {
    const recovery = envelope.details?.recovery;
    super(envelope.message, {
      code: envelope.code,
      details: envelope.details,
      hint: typeof recovery === 'string' ? recovery : undefined,
      ...options,
    });
    this.status = status;
  }
}

/** Node's file-system errors are the user's to fix (a missing folder, a file not readable): shown plainly. */
export function toCliError(err: unknown): CliError {
  if (err instanceof CliError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code))
    return new CliError((err as Error).message, { code: code.toLowerCase() });
  throw err;
}
