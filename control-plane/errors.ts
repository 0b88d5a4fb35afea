// One error type for everything a caller may see. Anything else that escapes is a bug: it is logged
// with the request id and rendered as `internal_error`, never with its message or stack.

export class BerthError extends Error {
  readonly code: string;
  readonly status: number;
  readonly details?: Record<string, unknown>;
  /** Records rendered beside the error envelope, e.g. the failed function of a deployment. */
  readonly records?: Record<string, unknown>;

  constructor(code: string, status: number, message: string, details?: Record<string, unknown>, records?: Record<string, unknown>) {
    super(message);
    this.name = 'BerthError';
    this.code = code;
    this.status = status;
    if (details !== undefined) this.details = details;
    if (records !== undefined) this.records = records;
  }
}

export const invalid = (message: string, details?: Record<string, unknown>) =>
  new BerthError('invalid_request', 400, message, details);

export const notFound = (what: string) => new BerthError('not_found', 404, `${what} not found`);

export const conflict = (code: string, message: string, details?: Record<string, unknown>) =>
  new BerthError(code, 409, message, details);
