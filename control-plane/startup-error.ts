// Problems an operator can fix, found while Berth starts or an admin command opens the data dir. Each
// says in one line what is wrong and what to do; `berth serve` and `berth admin` print it and exit 1,
// without a stack trace.
import fs from 'node:fs';
import path from 'node:path';
import { resolveDenoBinary } from '../runtime-host/deno-binary.ts';
import { DataDirInUse } from '../storage/data-dir-lock.ts';
import { StorageUnavailableError } from '../storage/blob-driver.ts';
import { errnoCode } from '../storage/durable.ts';

export class StartupError extends Error {}

/**
 * Why the server could not listen, or the error itself when it is not one an operator can fix. `names`
 * are the settings of that listener's port and address (the plain one's by default).
 */
export function listenProblem(
  err: unknown,
  bind: string,
  port: number,
  names: { port: string; bind: string } = { port: 'BERTH_PORT', bind: 'BERTH_BIND' },
): unknown {
  switch (errnoCode(err)) {
    case 'EADDRINUSE':
      return new StartupError(
        `port ${port} on ${bind} is already in use by another program: stop that program, or set ${names.port} to a free port`,
      );
    case 'EACCES':
      return new StartupError(
        names.port === 'BERTH_PORT'
          ? `this user may not listen on port ${port} (ports below 1024 need privileges): set BERTH_PORT above 1023 and put a proxy in front (docs/deploy.md)`
          : `this user may not listen on port ${port} (ports below 1024 need privileges): give Node the capability (setcap cap_net_bind_service=+ep) or run Berth under systemd with AmbientCapabilities=CAP_NET_BIND_SERVICE (docs/deploy.md)`,
      );
    case 'EADDRNOTAVAIL':
      return new StartupError(
        `${bind} is not an address of this machine: set ${names.bind} to one of its addresses, e.g. 127.0.0.1 or 0.0.0.0`,
      );
    default:
      return err;
  }
}

/** Why the data dir could not be made or written, or the error itself. */
export function dataDirProblem(err: unknown, dataDir: string): unknown {
  const where = path.resolve(dataDir);
  switch (errnoCode(err)) {
    case 'EACCES':
    case 'EPERM':
      return new StartupError(
        `the data dir ${where} is not writable by this user: give the user running Berth its ownership, or set BERTH_DATA_DIR`,
      );
    case 'EROFS':
      return new StartupError(
        `the data dir ${where} is on a read-only file system: set BERTH_DATA_DIR to a writable place`,
      );
    case 'ENOTDIR':
    case 'EEXIST':
      return new StartupError(
        `the data dir ${where} is not a directory (or a part of its path is a file): set BERTH_DATA_DIR to a directory`,
      );
    case 'ENOSPC':
      return new StartupError(`the disk of the data dir ${where} is full: free some space`);
    default:
      return err;
  }
}

/** Another server holds the data dir, or the error itself. */
export function dataDirLockProblem(err: unknown): unknown {
  if (!(err instanceof DataDirInUse)) return err;
  return new StartupError(
    `${err.message}: stop it first, or set BERTH_DATA_DIR to another folder (\`berth admin\` commands may run beside it)`,
  );
}

/** The Deno executable functions and site databases run in, checked to be there and runnable. */
export function findDeno(override: string | undefined): string {
  let denoPath: string;
  try {
    denoPath = resolveDenoBinary(override);
    fs.accessSync(denoPath, fs.constants.X_OK);
  } catch {
    throw new StartupError(
      override
        ? `BERTH_DENO is ${override}, which is not an executable file: point it at a deno binary, or unset it to use the one npm installed`
        : 'the Deno binary npm installs with Berth is missing: run `npm ci` (or `make install`) in the Berth folder, or set BERTH_DENO to a deno executable',
    );
  }
  return denoPath;
}

/** Why the object store could not be used: its message names the endpoint and bucket, never a credential. */
export function blobStoreProblem(err: unknown): unknown {
  if (!(err instanceof StorageUnavailableError)) return err;
  if (err.reason === 'NoSuchBucket') return new StartupError(err.message);
  const hint = /AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|CredentialsProviderError|Forbidden/.test(
    err.reason,
  )
    ? 'check the credentials the AWS SDK finds (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance role)'
    : 'check BERTH_OBJECT_STORE, BERTH_S3_ENDPOINT and that the store is up';
  return new StartupError(`${err.message}: ${hint}`);
}
