// `berth login`: a key for this machine, approved in the browser by a signed-in user, stored in the
// user's config directory; `berth logout` revokes it and forgets it. The CLI never sees a password:
// it shows a short code, the user checks that the dashboard shows the same one and approves, and the
// CLI, polling with a token only it holds, collects the key once.
import { spawn } from 'node:child_process';
import os from 'node:os';
import got, { RequestError } from 'got';
import { VERSION } from '../../version.ts';
import { cannotReach } from '../api-client.ts';
import { ApiError, CliError } from '../cli-error.ts';
import type { CommandDefinition } from '../command.ts';
import { DEFAULT_URL, normalizeUrl } from '../connection.ts';
import { type StoredLogin, credentialsPath, readLogin, removeLogin, writeLogin } from '../credentials.ts';
import { EXIT } from '../exit-codes.ts';
import type { Output } from '../output.ts';

const POLL_MS = 2000;
/** How long the CLI keeps trying through network failures: a login request lives 10 minutes. */
const GIVE_UP_MS = 11 * 60_000;

interface Started {
  login: { code: string; expiresAt: string };
  pollToken: string;
  approveUrl: string;
}

interface Approved {
  status: 'APPROVED';
  key: string;
  keyId: string;
  accountId: string;
  permission: 'READ' | 'WRITE';
}

interface Answer {
  status: number;
  body: unknown;
  retryAfter: number | undefined;
}

class Unreachable extends CliError {}

/** One POST to the control plane outside /v0; network failures become `Unreachable`. */
async function post(
  url: string,
  path: string,
  options: { json?: unknown; key?: string; signal?: AbortSignal } = {},
): Promise<Answer> {
  try {
    const res = await got.post(`${url}/${path}`, {
      json: options.json ?? {},
      headers: {
        'user-agent': `berth-cli/${VERSION}`,
        ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
      },
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { connect: 10_000, request: 30_000 },
      responseType: 'text',
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const seconds = Number(res.headers['retry-after']);
    return {
      status: res.statusCode,
      body: parseJson(res.body),
      retryAfter: Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined,
    };
  } catch (err) {
    if (options.signal?.aborted) throw cancelled();
    if (err instanceof RequestError && cannotReach(err)) {
      throw new Unreachable(`cannot reach Berth at ${url}: ${err.code}`, {
        code: 'server_unreachable',
        exitCode: EXIT.UNREACHABLE,
        hint: 'Is the server running? Give its address with --url (the default is BERTH_URL, then http://127.0.0.1:8080).',
      });
    }
    if (err instanceof RequestError)
      throw new CliError(`the request to ${url} failed: ${err.message}`, { code: 'request_failed' });
    throw err;
  }
}

function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

/** The API's error envelope in `answer`, as an ApiError. */
function apiError(url: string, answer: Answer): ApiError {
  const envelope = (answer.body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return typeof envelope?.code === 'string' && typeof envelope.message === 'string'
    ? new ApiError(answer.status, { code: envelope.code, message: envelope.message })
    : new ApiError(answer.status, { code: `http_${answer.status}`, message: `${url} answered ${answer.status}` });
}

const cancelled = () => new CliError('login cancelled', { code: 'cancelled' });

/** Waits `ms`, or less when `signal` aborts (then throws). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(cancelled());
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelled());
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Whether a browser can be shown to the person at this terminal. */
function browserAvailable(env: NodeJS.ProcessEnv = process.env): boolean {
  if (!process.stdout.isTTY || !process.stderr.isTTY) return false;
  if (process.platform === 'win32') return true;
  // `open` over ssh would open a browser on the remote Mac's screen, not on the user's.
  if (process.platform === 'darwin') return !env.SSH_CONNECTION && !env.SSH_TTY;
  return Boolean(env.DISPLAY || env.WAYLAND_DISPLAY);
}

/** Characters of a URL that no opener's command line gives a meaning to (no &, quotes, ^, |, spaces). */
const SAFE_URL = /^https?:\/\/[A-Za-z0-9\-._~:/?#[\]@!$'()*+,;=%]+$/;

/** Starts the desktop's URL opener and does not wait for it; whatever goes wrong is ignored. */
function openBrowser(url: string): boolean {
  if (!SAFE_URL.test(url)) return false;
  const [command, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['cmd', ['/d', '/c', 'start', '""', url]]
        : ['xdg-open', [url]];
  try {
    const child = spawn(command, args, {
      detached: true,
      stdio: 'ignore',
      windowsHide: true,
      windowsVerbatimArguments: process.platform === 'win32',
    });
    child.on('error', () => {});
    child.unref();
    return true;
  } catch {
    return false;
  }
}

/** Polls until the request is approved and collected, expires, or Ctrl-C. */
async function waitForApproval(url: string, pollToken: string, out: Output): Promise<Approved> {
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const giveUp = Date.now() + GIVE_UP_MS;
    let delay = POLL_MS;
    let warned = false;
    for (;;) {
      await sleep(delay, abort.signal);
      delay = POLL_MS;
      let answer: Answer;
      try {
        answer = await post(url, 'cli-login/poll', { json: { pollToken }, signal: abort.signal });
      } catch (err) {
        // A server restarting keeps the request: keep asking until it could not be valid any more.
        if (!(err instanceof Unreachable) || Date.now() > giveUp) throw err;
        if (!warned) out.note(`${err.message}; still trying`);
        warned = true;
        continue;
      }
      warned = false;
      const status = (answer.body as { status?: unknown } | undefined)?.status;
      if (answer.status === 200 && status === 'APPROVED') return answer.body as Approved;
      if (answer.status === 202 || answer.status === 429) {
        delay = Math.max(POLL_MS, answer.retryAfter ?? 0);
        continue;
      }
      if (answer.status === 410) {
        const failure = apiError(url, answer);
        throw new ApiError(
          410,
          { code: failure.code, message: `the login request expired or was already used: ${failure.message}` },
          {
            hint: 'Run `berth login` again: a request is valid for 10 minutes and is approved once.',
          },
        );
      }
      throw apiError(url, answer);
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/** Revokes a key of an earlier login that a new one replaces, without failing the new login. */
async function revokeReplaced(previous: StoredLogin, out: Output): Promise<void> {
  try {
    const answer = await post(previous.url, 'cli-login/revoke', { key: previous.key });
    if (answer.status === 200) out.note(`Revoked the key of the previous login (${previous.keyId}).`);
    else if (answer.status !== 401)
      out.note(
        `The previous login’s key ${previous.keyId} at ${previous.url} was not revoked: ${apiError(previous.url, answer).message}`,
      );
  } catch (err) {
    out.note(
      `The previous login’s key ${previous.keyId} at ${previous.url} was not revoked: ${(err as Error).message}`,
    );
  }
}

/** The account's name, for the message; a login works without it. */
async function accountName(url: string, key: string): Promise<string | undefined> {
  try {
    const res = await got(`${url}/v0/accounts/current`, {
      headers: { authorization: `Bearer ${key}`, 'user-agent': `berth-cli/${VERSION}` },
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { request: 10_000 },
      responseType: 'json',
    });
    const name = (res.body as { name?: unknown } | undefined)?.name;
    return res.statusCode === 200 && typeof name === 'string' ? name : undefined;
  } catch {
    return undefined;
  }
}

function previousLogin(): StoredLogin | undefined {
  try {
    return readLogin();
  } catch {
    // An unreadable file is replaced by the new login.
    return undefined;
  }
}

export const loginCommand: CommandDefinition = {
  usage: 'login',
  summary: 'get an API key for this machine, approved in the browser, and store it for the other commands',
  examples: [
    'berth login',
    'berth login --url https://berth.example.com',
    'berth login --no-browser      # over ssh: open the link on another device',
  ],
  options: [
    {
      flags: '--url <url>',
      description: 'the server’s address (default BERTH_URL, then the stored login’s, then http://127.0.0.1:8080)',
    },
    { flags: '--no-browser', description: 'print the approval link without opening a browser' },
  ],
  async run({ options, out }) {
    const given =
      typeof options.url === 'string'
        ? options.url
        : (process.env.BERTH_URL ?? '').trim() || previousLogin()?.url || DEFAULT_URL;
    const url = normalizeUrl(given, typeof options.url === 'string' ? '--url' : 'BERTH_URL');

    const answer = await post(url, 'cli-login', { json: { machine: os.hostname() } });
    if (answer.status !== 201) throw apiError(url, answer);
    const started = answer.body as Started;
    const { code, expiresAt } = started.login;
    out.print(
      { login: { code, expiresAt }, approveUrl: started.approveUrl },
      `Your login code is ${code}.\nOpen ${started.approveUrl} and check that it shows the code ${code}, then approve it.`,
    );
    if (options.browser !== false && browserAvailable() && openBrowser(started.approveUrl))
      out.note('Opened the link in your browser.');
    out.note(`Waiting for the approval (until ${new Date(expiresAt).toLocaleTimeString()}; Ctrl-C to stop)…`);

    const approved = await waitForApproval(url, started.pollToken, out);
    const previous = previousLogin();
    const login: StoredLogin = {
      url,
      key: approved.key,
      keyId: approved.keyId,
      accountId: approved.accountId,
      permission: approved.permission,
      createdAt: new Date().toISOString(),
    };
    const file = writeLogin(login);
    if (previous && previous.keyId !== login.keyId) await revokeReplaced(previous, out);
    const name = await accountName(url, login.key);
    out.print(
      {
        url,
        accountId: login.accountId,
        ...(name !== undefined ? { accountName: name } : {}),
        keyId: login.keyId,
        permission: login.permission,
        credentials: file,
      },
      `Logged in to ${url}: account ${name ? `${name} (${login.accountId})` : login.accountId}, with a ${login.permission} key (${login.keyId}).\nThe key is stored in ${file}.`,
    );
  },
};

export const logoutCommand: CommandDefinition = {
  usage: 'logout',
  summary: 'revoke the key `berth login` stored on its server, and forget it',
  examples: ['berth logout', 'berth logout --force      # forget the key even if the server cannot be reached'],
  options: [{ flags: '--force', description: 'forget the stored key even when the server cannot revoke it' }],
  async run({ options, out }) {
    const file = credentialsPath();
    let login: StoredLogin | undefined;
    try {
      login = readLogin();
    } catch (err) {
      if (!options.force) throw err;
      removeLogin();
      out.print(
        { loggedOut: true, revoked: false, credentials: file },
        `Forgot the unreadable login in ${file}; its key, if any, was not revoked.`,
      );
      return;
    }
    if (!login) {
      out.print({ loggedOut: false, credentials: file }, `Not logged in: there is no stored login at ${file}.`);
      return;
    }

    let answer: Answer | undefined;
    let failure: CliError | undefined;
    try {
      answer = await post(login.url, 'cli-login/revoke', { key: login.key });
      // 401: revoked already, or unknown to this server; either way the key opens nothing there.
      if (answer.status !== 200 && answer.status !== 401) failure = apiError(login.url, answer);
    } catch (err) {
      if (!(err instanceof CliError)) throw err;
      failure = err;
    }
    if (failure) {
      if (!options.force) {
        throw new CliError(`could not revoke the key: ${failure.message}; the login is kept in ${file}`, {
          code: failure.code,
          exitCode: failure instanceof Unreachable ? EXIT.UNREACHABLE : EXIT.FAILED,
          hint: 'Try again when the server answers, or run `berth logout --force` to forget the key without revoking it.',
        });
      }
      removeLogin();
      out.print(
        { loggedOut: true, revoked: false, url: login.url, keyId: login.keyId, credentials: file },
        `Forgot the login to ${login.url}, but its key ${login.keyId} was not revoked (${failure.message}): revoke it on the server.`,
      );
      return;
    }
    removeLogin();
    const revoked = answer!.status === 200;
    out.print(
      { loggedOut: true, revoked, url: login.url, keyId: login.keyId, credentials: file },
      revoked
        ? `Logged out of ${login.url}: key ${login.keyId} revoked and ${file} deleted.`
        : `Logged out of ${login.url}: the server no longer accepted key ${login.keyId}; ${file} deleted.`,
    );
  },
};
