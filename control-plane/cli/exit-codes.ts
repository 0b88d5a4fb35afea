/** The `berth` command's exit codes; scripts rely on them, and the README lists them. */
export const EXIT = {
  OK: 0,
  /** An operation failed: an API error, a failed deployment, a refused local file. */
  FAILED: 1,
  /** A mistake in the command line. */
  USAGE: 2,
  /** The server cannot be reached, or it does not accept the API key. */
  UNREACHABLE: 3,
} as const;
