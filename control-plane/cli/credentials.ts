// The login `berth login` stores: one API key and the server it belongs to, in
// `$XDG_CONFIG_HOME/berth/credentials.json` (default `~/.config/berth`; BERTH_CONFIG_DIR names the
// `berth` folder itself). The folder is 0700 and the file 0600 from the moment it exists: it is
// written to a temp file created with that mode, then renamed over the old one.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Permission } from '../deps.ts';
import { CliError } from './cli-error.ts';

export interface StoredLogin {
  /** The server's origin, without a trailing slash: the key is only ever sent there. */
  url: string;
  key: string;
  keyId: string;
  accountId: string;
  permission: Permission;
  createdAt: string;
}

const FILE = 'credentials.json';

/** The `berth` folder of the user's config directory. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const own = (env.BERTH_CONFIG_DIR ?? '').trim();
  if (own) return path.resolve(own);
  // The XDG spec ignores a relative XDG_CONFIG_HOME.
  const xdg = (env.XDG_CONFIG_HOME ?? '').trim();
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.config');
  return path.join(base, 'berth');
}

export const credentialsPath = (env: NodeJS.ProcessEnv = process.env): string => path.join(configDir(env), FILE);

/** The stored login, or undefined when there is none. */
export function readLogin(env: NodeJS.ProcessEnv = process.env): StoredLogin | undefined {
  const file = credentialsPath(env);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!isStoredLogin(parsed)) {
    throw new CliError(`the stored login in ${file} is not one berth wrote`, {
      code: 'bad_credentials',
      hint: `Run \`berth login\` again, or \`berth logout --force\` to delete ${file}.`,
    });
  }
  return { ...parsed, url: parsed.url.replace(/\/+$/, '') };
}

/** Replaces the stored login, atomically; the key is never readable by other users, even for a moment. */
export function writeLogin(login: StoredLogin, env: NodeJS.ProcessEnv = process.env): string {
  const dir = configDir(env);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  // mkdir leaves an existing folder as it was; this one holds keys and nothing else of anyone's.
  if (process.platform !== 'win32' && (fs.statSync(dir).mode & 0o077) !== 0) fs.chmodSync(dir, 0o700);
  const file = path.join(dir, FILE);
  const temp = path.join(dir, `.${FILE}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`);
  // 'wx' creates a new file with mode 0600 (the umask can only take bits away), or fails.
  const fd = fs.openSync(temp, 'wx', 0o600);
  try {
    try {
      fs.writeFileSync(fd, `${JSON.stringify(login, null, 2)}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
  } catch (err) {
    fs.rmSync(temp, { force: true });
    throw err;
  }
  syncDir(dir);
  return file;
}

/** Forgets the stored login; true when there was one. */
export function removeLogin(env: NodeJS.ProcessEnv = process.env): boolean {
  const file = credentialsPath(env);
  try {
    fs.unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  syncDir(path.dirname(file));
  return true;
}

/** Makes a rename or an unlink durable; not every platform can open a folder, which is harmless. */
function syncDir(dir: string): void {
  try {
    const fd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Windows cannot fsync a directory.
  }
}

function isStoredLogin(value: unknown): value is StoredLogin {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.url === 'string' &&
    /^https?:\/\//.test(v.url) &&
    typeof v.key === 'string' &&
    v.key.length > 0 &&
    typeof v.keyId === 'string' &&
    typeof v.accountId === 'string' &&
    (v.permission === 'READ' || v.permission === 'WRITE') &&
    typeof v.createdAt === 'string'
  );
}
