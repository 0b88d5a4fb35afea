// Browser-approved CLI login. The CLI starts a request and shows its short code; a signed-in user, in
// the dashboard, checks that the code matches, picks an account and a permission, and approves it,
// once; the CLI, polling with a token only it holds, collects a new API key named after its machine,
// once. A request lives ten minutes. The key is made when it is collected, so an approval nobody
// collects leaves no working key behind.
import crypto from 'node:crypto';
import { BerthError, notFound } from '../errors.ts';
import { type Actor, type Deps, type Permission, newId, timestamp } from '../deps.ts';
import { AttemptLimit } from './attempt-limit.ts';
import type { Metadata } from '../db/metadata.ts';
import { createKey } from './keys.ts';
import { digestToken, newToken } from './tokens.ts';

export const CLI_LOGIN_MS = 10 * 60_000;
/** Login requests one client address may start in a quarter of an hour. */
export const cliLoginLimit = (metadata: Pick<Metadata, 'rateLimiter'>) =>
  new AttemptLimit(metadata, 'cli-login-address', 30, 15 * 60_000);
/** No 0/O or 1/I: the code is read off one screen and compared with another. */
const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
const CODE = /^[A-Z2-9]{4}-[A-Z2-9]{4}$/;
const MAX_MACHINE_CHARS = 100;

interface CliLoginRow {
  id: string;
  code: string;
  poll_hash: string;
  machine: string;
  created_at: string;
  expires_at: string;
  approved_by: string | null;
  account_id: string | null;
  permission: Permission | null;
  approved_at: string | null;
  key_id: string | null;
  collected_at: string | null;
}

export type CliLoginStatus = 'PENDING' | 'APPROVED' | 'COLLECTED' | 'EXPIRED';

export interface CliLogin {
  code: string;
  machine: string;
  status: CliLoginStatus;
  createdAt: string;
  expiresAt: string;
}

function newCode(): string {
  const chars = Array.from(crypto.randomBytes(8), (byte) => CODE_ALPHABET[byte % CODE_ALPHABET.length]).join('');
  return `${chars.slice(0, 4)}-${chars.slice(4)}`;
}

function statusOf(row: CliLoginRow, now: Date): CliLoginStatus {
  if (row.collected_at) return 'COLLECTED';
  if (Date.parse(row.expires_at) <= now.getTime()) return 'EXPIRED';
  return row.approved_at ? 'APPROVED' : 'PENDING';
}

const toCliLogin = (row: CliLoginRow, now: Date): CliLogin => ({
  code: row.code,
  machine: row.machine,
  status: statusOf(row, now),
  createdAt: row.created_at,
  expiresAt: row.expires_at,
});

/** A machine name as the CLI reported it, made printable and short: it names a key in a list. */
function machineName(raw: unknown): string {
  const name =
    typeof raw === 'string'
      ? raw
          .replace(/[^\x20-\x7e]/g, '')
          .trim()
          .slice(0, MAX_MACHINE_CHARS)
      : '';
  return name || 'unnamed machine';
}

export async function startCliLogin(
  deps: Deps,
  input: { machine: unknown; address: string },
): Promise<{ login: CliLogin; pollToken: string }> {
  const wait = await deps.cliLoginLimit.retryAfter(input.address);
  if (wait > 0)
    throw new BerthError('too_many_attempts', 'too many login requests from this address; try again later', {
      retryAfterSeconds: wait,
    });
  await deps.cliLoginLimit.fail(input.address);
  const pollToken = newToken();
  const now = deps.now();
  // Anyone may start a request: those a day past their expiry go, so the table stays small.
  await deps
    .db('cli_logins')
    .where('expires_at', '<', new Date(now.getTime() - 24 * 3600_000).toISOString())
    .delete();
  const row: CliLoginRow = {
    id: newId(),
    code: newCode(),
    poll_hash: digestToken(pollToken),
    machine: machineName(input.machine),
    created_at: now.toISOString(),
    expires_at: new Date(now.getTime() + CLI_LOGIN_MS).toISOString(),
    approved_by: null,
    account_id: null,
    permission: null,
    approved_at: null,
    key_id: null,
    collected_at: null,
  };
  await deps.db('cli_logins').insert(row);
  return { login: toCliLogin(row, now), pollToken };
}

async function rowByCode(deps: Deps, code: string): Promise<CliLoginRow> {
  const normalized = code.trim().toUpperCase();
  const row = CODE.test(normalized)
    ? await deps.db<CliLoginRow>('cli_logins').where({ code: normalized }).first()
    : undefined;
  if (!row) throw notFound('login request');
  return row;
}

/** The request behind a code, for the dashboard to show before the user approves it. */
export async function getCliLogin(deps: Deps, code: string): Promise<{ login: CliLogin }> {
  return { login: toCliLogin(await rowByCode(deps, code), deps.now()) };
}

/** The signed-in user approves the request for their current account with `permission`, once. */
export async function approveCliLogin(
  deps: Deps,
  actor: Actor,
  code: string,
  permission: Permission,
): Promise<{ login: CliLogin }> {
  const row = await rowByCode(deps, code);
  const now = deps.now();
  if (statusOf(row, now) === 'EXPIRED')
    throw new BerthError('login_expired', 'this login request has expired; run `berth login` again');
  const approved = await deps
    .db('cli_logins')
    .where({ id: row.id, approved_at: null })
    .andWhere('expires_at', '>', now.toISOString())
    .update({ approved_by: actor.user!.id, account_id: actor.accountId, permission, approved_at: now.toISOString() });
  if (approved === 0) throw new BerthError('login_already_approved', 'this login request was approved already');
  return { login: toCliLogin((await deps.db<CliLoginRow>('cli_logins').where({ id: row.id }).first())!, deps.now()) };
}

export type CliLoginPoll =
  | { status: 'PENDING' }
  | { status: 'APPROVED'; key: string; keyId: string; accountId: string; permission: Permission };

/** The CLI's poll: still pending, or the new key, handed over once. */
export async function pollCliLogin(deps: Deps, pollToken: unknown): Promise<CliLoginPoll> {
  const gone = new BerthError(
    'login_expired',
    'this login request has expired or was collected already; run `berth login` again',
  );
  if (typeof pollToken !== 'string' || pollToken.length > 200) throw gone;
  const row = await deps
    .db<CliLoginRow>('cli_logins')
    .where({ poll_hash: digestToken(pollToken) })
    .first();
  if (!row) throw gone;
  const status = statusOf(row, deps.now());
  if (status === 'PENDING') return { status };
  if (status !== 'APPROVED') throw gone;
  return deps.db.transaction(async (trx) => {
    const collected = await trx('cli_logins')
      .where({ id: row.id, collected_at: null })
      .update({ collected_at: timestamp(deps) });
    if (collected === 0) throw gone;
    const { id, key } = await createKey(
      { db: trx, now: deps.now },
      {
        accountId: row.account_id!,
        permission: row.permission!,
        name: `CLI on ${row.machine}`,
        createdBy: row.approved_by!,
        forCli: true,
      },
    );
    await trx('cli_logins').where({ id: row.id }).update({ key_id: id });
    return { status: 'APPROVED' as const, key, keyId: id, accountId: row.account_id!, permission: row.permission! };
  });
}
