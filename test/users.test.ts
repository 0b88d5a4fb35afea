// Users and memberships, made by the operator's `berth admin create-user` as a script would: the
// password comes on stdin, is stored as an scrypt hash, and never appears in the output.
import { spawn } from 'node:child_process';
import path from 'node:path';
import test from 'ava';
import { makeDataDir } from './helpers/berth.ts';
import { runBerth, withBackend } from './helpers/process.ts';
import { storedMetadata } from './helpers/postgres.ts';
import { hashPassword, verifyPassword } from '../control-plane/services/passwords.ts';

const BIN = path.resolve(import.meta.dirname, '../control-plane/cli/berth.js');

/** `berth admin …` with `input` on stdin. */
async function admin(
  args: string[],
  givenEnv: Record<string, string>,
  input: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = await withBackend(givenEnv);
  const child = spawn(process.execPath, [BIN, 'admin', ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.end(input);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

test('create-user makes a member from a password on stdin, stored only as a hash', async (t) => {
  const dataDir = await makeDataDir(t);
  const env = { BERTH_DATA_DIR: dataDir };
  const account = JSON.parse(
    (await runBerth(['admin', 'create-account', '--name', 'Team', '--create-data-dir', '--json'], env)).stdout,
  ) as { account: { id: string } };
  const password = 'correct horse battery staple';
  const created = await admin(
    [
      'create-user',
      '--email',
      ' Ada@Example.com ',
      '--account',
      account.account.id,
      '--role',
      'ADMIN',
      '--password-stdin',
      '--json',
    ],
    env,
    `${password}\n`,
  );
  t.is(created.code, 0, created.stderr);
  const { user } = JSON.parse(created.stdout) as { user: { id: string; email: string } };
  t.is(user.email, 'ada@example.com', 'emails are compared lowercased');
  t.false(created.stdout.includes(password));

  t.false((await storedMetadata(dataDir)).includes(password), 'the password is not stored in clear');

  // The same person added to a second account is the same user.
  const other = JSON.parse((await runBerth(['admin', 'create-account', '--name', 'Other', '--json'], env)).stdout) as {
    account: { id: string };
  };
  const again = await admin(
    [
      'create-user',
      '--email',
      'ada@example.com',
      '--account',
      other.account.id,
      '--role',
      'MEMBER',
      '--password-stdin',
      '--json',
    ],
    env,
    password,
  );
  t.is(JSON.parse(again.stdout).user.id, user.id);
});

test('create-user refuses a password on argv, a short password, a bad role and an unknown account', async (t) => {
  const dataDir = await makeDataDir(t);
  const env = { BERTH_DATA_DIR: dataDir };
  const account = JSON.parse(
    (await runBerth(['admin', 'create-account', '--name', 'Team', '--create-data-dir', '--json'], env)).stdout,
  ) as { account: { id: string } };
  const base = ['create-user', '--email', 'bob@example.com', '--account', account.account.id];
  const noStdin = await admin([...base, '--role', 'ADMIN'], env, '');
  t.is(noStdin.code, 2);
  t.regex(noStdin.stderr, /--password-stdin/);
  const short = await admin([...base, '--role', 'ADMIN', '--password-stdin', '--json'], env, 'short');
  t.is(short.code, 1);
  t.is(JSON.parse(short.stdout).error.code, 'invalid_password');
  const role = await admin([...base, '--role', 'OWNER', '--password-stdin'], env, 'long enough password');
  t.is(role.code, 2);
  const missing = await admin(
    [
      'create-user',
      '--email',
      'bob@example.com',
      '--account',
      crypto.randomUUID(),
      '--role',
      'ADMIN',
      '--password-stdin',
      '--json',
    ],
    env,
    'long enough password',
  );
  t.is(missing.code, 1);
  t.is(JSON.parse(missing.stdout).error.code, 'not_found');
  const email = await admin(
    [
      'create-user',
      '--email',
      'not-an-email',
      '--account',
      account.account.id,
      '--role',
      'ADMIN',
      '--password-stdin',
      '--json',
    ],
    env,
    'long enough password',
  );
  t.is(JSON.parse(email.stdout).error.code, 'invalid_request');
});

test('passwords verify against their scrypt hash only, and a missing hash costs as much as a wrong one', async (t) => {
  const stored = await hashPassword('the right password');
  t.regex(stored, /^scrypt\$32768\$8\$1\$[\w-]+\$[\w-]+$/);
  t.not(await hashPassword('the right password'), stored, 'every hash has its own salt');
  t.true(await verifyPassword('the right password', stored));
  t.false(await verifyPassword('the wrong password', stored));
  t.false(await verifyPassword('the right password', null));
  t.false(await verifyPassword('the right password', 'garbage'));
});

test('reset-password prints a one-time link for the user, and names an unknown email as not found', async (t) => {
  const dataDir = await makeDataDir(t);
  const env = { BERTH_DATA_DIR: dataDir, BERTH_PORT: '8123' };
  const account = JSON.parse(
    (await runBerth(['admin', 'create-account', '--name', 'Team', '--create-data-dir', '--json'], env)).stdout,
  ) as { account: { id: string } };
  await admin(
    [
      'create-user',
      '--email',
      'ada@example.com',
      '--account',
      account.account.id,
      '--role',
      'MEMBER',
      '--password-stdin',
    ],
    env,
    'a long enough password',
  );
  const reset = await runBerth(['admin', 'reset-password', '--email', 'ADA@example.com', '--json'], env);
  t.is(reset.code, 0, reset.stderr);
  const { user, link } = JSON.parse(reset.stdout) as { user: { email: string }; link: string };
  t.is(user.email, 'ada@example.com');
  t.regex(link, /^http:\/\/127\.0\.0\.1:8123\/login\/set-password\?token=[\w-]{43}$/);
  const unknown = await runBerth(['admin', 'reset-password', '--email', 'nobody@example.com', '--json'], env);
  t.is(unknown.code, 1);
  t.is(JSON.parse(unknown.stdout).error.code, 'not_found');
});
