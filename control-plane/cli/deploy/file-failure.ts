// Which failures concern one file (reported with it, the rest of the deploy going on) and which end
// the deploy (no server, a refused key).
import { ApiError } from '../cli-error.ts';

export interface FileFailure {
  path: string;
  error: { code: string; message: string };
}

export function fileFailure(err: unknown): { code: string; message: string } {
  if (err instanceof ApiError && err.status !== 401) return { code: err.code, message: err.message };
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (!(err instanceof ApiError) && typeof code === 'string' && /^E[A-Z]+$/.test(code))
    return { code: code.toLowerCase(), message: (err as Error).message };
  throw err;
}
