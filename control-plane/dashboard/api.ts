// The dashboard's only way to the server: /session for who is signed in, and the /v0 API with the
// session cookie, the chosen account in Berth-Account and, on every request, the session's CSRF token.

export type Role = 'ADMIN' | 'MEMBER';

export interface Membership {
  accountId: string;
  accountName: string;
  role: Role;
}

export interface Session {
  user: { id: string; email: string; memberships: Membership[] };
  csrfToken: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

const ACCOUNT_KEY = 'berth.account';
const RETURN_KEY = 'berth.returnTo';

let session: Session | null = null;
let accountId = '';

export const currentSession = (): Session => {
  if (!session) throw new Error('not signed in');
  return session;
};

export const currentAccountId = (): string => accountId;

export const currentMembership = (): Membership | undefined =>
  session?.user.memberships.find((m) => m.accountId === accountId);

/** ADMINs manage keys, members, exports, database restores and deletion; MEMBERs do not see those controls. */
export const isAdmin = (): boolean => currentMembership()?.role === 'ADMIN';

export function chooseAccount(id: string): void {
  accountId = id;
  try {
    localStorage.setItem(ACCOUNT_KEY, id);
  } catch {
    // Storage may be off; the choice then lasts for this page only.
  }
}

/** Off to the sign-in page, coming back to this page (its hash) afterwards. */
export function toSignIn(): never {
  try {
    if (location.hash.length > 2) sessionStorage.setItem(RETURN_KEY, location.hash);
  } catch {
    // Without storage, the user comes back to the sites list.
  }
  location.href = '/login';
  throw new ApiError(401, 'unauthorized', 'signed out');
}

/** Where to go back to after a sign-in, once. */
export function takeReturnHash(): string | null {
  try {
    const hash = sessionStorage.getItem(RETURN_KEY);
    sessionStorage.removeItem(RETURN_KEY);
    return hash;
  } catch {
    return null;
  }
}

async function errorOf(res: Response): Promise<ApiError> {
  let body: { error?: { code?: string; message?: string; details?: Record<string, unknown> } } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // Not JSON (a proxy's page): the status says enough.
  }
  return new ApiError(
    res.status,
    body.error?.code ?? 'http_error',
    body.error?.message ?? `the server answered ${res.status} ${res.statusText}`,
    body.error?.details,
  );
}

/** Loads the session; not signed in sends the browser to /login. */
export async function loadSession(): Promise<Session> {
  const res = await fetch('/session', {
    credentials: 'same-origin',
    headers: { Accept: 'application/json' },
    cache: 'no-store',
  });
  if (res.status === 401) toSignIn();
  if (!res.ok) throw await errorOf(res);
  session = (await res.json()) as Session;
  let saved: string | null = null;
  try {
    saved = localStorage.getItem(ACCOUNT_KEY);
  } catch {
    // No storage: take the first account.
  }
  const memberships = session.user.memberships;
  const chosen = memberships.find((m) => m.accountId === saved) ?? memberships[0];
  accountId = chosen?.accountId ?? '';
  return session;
}

function headers(extra: Record<string, string> = {}, account = accountId): Record<string, string> {
  const out: Record<string, string> = { Accept: 'application/json', ...extra };
  if (account) out['Berth-Account'] = account;
  // Reads too: a reveal writes the access log, so the server wants the token on every session request.
  out['X-CSRF-Token'] = session?.csrfToken ?? '';
  return out;
}

export interface RequestOptions {
  /** Statuses whose JSON body is an answer, not an error (the query API's failed statement: 400). */
  accept?: number[];
  /** Acts in this account instead of the chosen one. */
  account?: string;
}

/** A JSON request to the API; an error envelope becomes an ApiError with the server's message. */
export async function api<T>(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  body?: unknown,
  options: RequestOptions = {},
): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    cache: 'no-store',
    headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }, options.account),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 401) toSignIn();
  if (!res.ok && !options.accept?.includes(res.status)) throw await errorOf(res);
  return (await res.json()) as T;
}

export const get = <T>(path: string, query?: Record<string, string | number | undefined>): Promise<T> => {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) if (value !== undefined) params.set(key, String(value));
  const search = params.toString();
  return api<T>('GET', search ? `${path}?${search}` : path);
};

/** Every page of a list, following `pagination.nextOffset` (at most `max` items). */
export async function getAll<T, K extends string>(
  path: string,
  key: K,
  query: Record<string, string | undefined> = {},
  max = 2000,
): Promise<T[]> {
  const items: T[] = [];
  let offset: number | null = 0;
  while (offset !== null && items.length < max) {
    const page: Record<K, T[]> & { pagination?: { nextOffset: number | null } } = await get(path, {
      ...query,
      limit: 200,
      offset,
    });
    items.push(...page[key]);
    offset = page.pagination?.nextOffset ?? null;
  }
  return items;
}

/** A bucket file's path as a URL path: each segment encoded, the slashes kept. */
export const objectPath = (bucketId: string, filePath: string): string =>
  `/v0/buckets/${encodeURIComponent(bucketId)}/objects/${filePath.split('/').map(encodeURIComponent).join('/')}`;

/** Raw bytes from the API (file downloads), with the same headers as any request. */
export async function getBlob(path: string): Promise<Blob> {
  const res = await fetch(path, { credentials: 'same-origin', cache: 'no-store', headers: headers() });
  if (res.status === 401) toSignIn();
  if (!res.ok) throw await errorOf(res);
  return res.blob();
}

/** A stream route's body (server-sent events), with the same headers as any request; `signal` ends it. */
export async function openStream(path: string, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
  const res = await fetch(path, {
    credentials: 'same-origin',
    cache: 'no-store',
    headers: headers({ Accept: 'text/event-stream' }),
    signal,
  });
  if (res.status === 401) toSignIn();
  if (!res.ok || !res.body) throw await errorOf(res);
  return res.body;
}

/** Saves `blob` as a download named `name`. */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/**
 * PUTs a file's bytes with XMLHttpRequest, whose upload progress fetch does not report; the same
 * headers as every other request.
 */
export function uploadFile(
  path: string,
  file: Blob,
  contentType: string,
  onProgress: (loaded: number, total: number) => void,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', path);
    for (const [name, value] of Object.entries(headers({ 'Content-Type': contentType })))
      xhr.setRequestHeader(name, value);
    xhr.upload.addEventListener('progress', (event) => {
      if (event.lengthComputable) onProgress(event.loaded, event.total);
    });
    xhr.addEventListener('load', () => {
      const body = parseJson(xhr.responseText) as { error?: { code?: string; message?: string } } | null;
      if (xhr.status === 401) {
        try {
          toSignIn();
        } catch (err) {
          reject(err);
        }
        return;
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else
        reject(
          new ApiError(
            xhr.status,
            body?.error?.code ?? 'http_error',
            body?.error?.message ?? `the upload failed (${xhr.status})`,
          ),
        );
    });
    xhr.addEventListener('error', () => reject(new Error('the upload failed: the server could not be reached')));
    xhr.addEventListener('abort', () => reject(new Error('the upload was cancelled')));
    xhr.send(file);
  });
}

/** Signs out (ending the session on the server) and goes to the sign-in page. */
export async function signOut(): Promise<void> {
  await fetch('/logout', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'X-CSRF-Token': session?.csrfToken ?? '' },
    redirect: 'manual',
  });
  session = null;
  location.href = '/login';
}
