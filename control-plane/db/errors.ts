// What a database error means, whichever backend raised it.

/** A UNIQUE or PRIMARY KEY constraint refused the write: another writer got there first. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
