// Where the server is and which key to show it: BERTH_URL and BERTH_API_KEY, for people and CI alike,
// or else the login `berth login` stored. The environment wins; a stored key is only ever sent to the
// server it was approved on.
import { CliError } from './cli-error.ts';
import { readLogin } from './credentials.ts';
import { EXIT } from './exit-codes.ts';
import { UsageError } from './usage-error.ts';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

export interface Connection {
  /** The API's origin, without a trailing slash. */
  url: string;
  key: string;
  /** Where the key came from, for messages: `BERTH_API_KEY` or `the stored login`. */
  keySource: string;
}

export const CREATE_KEY_HINT =
  'Run `berth login` to approve a key in the browser, or make one on the server with `npx berth admin create-key --account <accountId> --permission WRITE` and export BERTH_API_KEY=<key>.';

/** An http(s) address as the CLI keeps it: parsed, without a trailing slash; `what` names its source in the error. */
export function normalizeUrl(text: string, what = 'BERTH_URL'): string {
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new UsageError(`${what} must be an http:// or https:// URL, not "${text}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new UsageError(`${what} must be an http:// or https:// URL, not "${text}"`);
  parsed.hash = '';
  parsed.search = '';
  return parsed.href.replace(/\/+$/, '');
}

export function connectionFromEnv(env: NodeJS.ProcessEnv = process.env): Connection {
  const envUrl = (env.BERTH_URL ?? '').trim();
  const envKey = (env.BERTH_API_KEY ?? '').trim();
  if (envKey) return { url: normalizeUrl(envUrl || DEFAULT_URL), key: envKey, keySource: 'BERTH_API_KEY' };
  const stored = readLogin(env);
  if (!stored) {
    throw new CliError('BERTH_API_KEY is not set and there is no stored login', {
      code: 'no_api_key',
      exitCode: EXIT.UNREACHABLE,
      hint: CREATE_KEY_HINT,
    });
  }
  if (envUrl && normalizeUrl(envUrl) !== normalizeUrl(stored.url, 'the stored login’s url')) {
    throw new CliError(
      `BERTH_URL is ${normalizeUrl(envUrl)}, but the stored login is for ${stored.url}; its key is not sent elsewhere`,
      {
        code: 'login_for_another_server',
        exitCode: EXIT.UNREACHABLE,
        hint: `Run \`berth login --url ${normalizeUrl(envUrl)}\`, set BERTH_API_KEY, or unset BERTH_URL.`,
      },
    );
  }
  return { url: stored.url, key: stored.key, keySource: 'the stored login (berth login)' };
}
