// Where the server is and which key to show it: BERTH_URL and BERTH_API_KEY, for people and CI alike.
import { CliError } from './cli-error.ts';
import { EXIT } from './exit-codes.ts';
import { UsageError } from './usage-error.ts';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

export interface Connection {
  /** The API's origin, without a trailing slash. */
  url: string;
  key: string;
}

export const CREATE_KEY_HINT =
  'The first `berth serve` prints the owner account’s keys; make another with `npx berth admin create-key --account <accountId> --permission WRITE`, then export BERTH_API_KEY=<key>.';

export function connectionFromEnv(env: NodeJS.ProcessEnv = process.env): Connection {
  const url = (env.BERTH_URL ?? '').trim() || DEFAULT_URL;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`BERTH_URL must be an http:// or https:// URL, not "${url}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError(`BERTH_URL must be an http:// or https:// URL, not "${url}"`);
  const key = (env.BERTH_API_KEY ?? '').trim();
  if (!key) throw new CliError('BERTH_API_KEY is not set', { code: 'no_api_key', exitCode: EXIT.UNREACHABLE, hint: CREATE_KEY_HINT });
  return { url: url.replace(/\/+$/, ''), key };
}
