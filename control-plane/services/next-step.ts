// What to do next, as data: an operation of the catalogue and its input. Each front door renders it in
// its own terms: REST as a `nextCommand` ("GET /v0/…"), MCP as the tool and its arguments.
export interface NextStep {
  /** An operation's name, e.g. `list_database_migrations`. */
  operation: string;
  input: Record<string, unknown>;
}

export const nextStep = (operation: string, input: Record<string, unknown>): NextStep => ({ operation, input });
