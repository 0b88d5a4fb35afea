// The operator's commands: `berth serve` and `berth admin …`. They act on the server and its data dir
// rather than through the API, and keep the output and exit codes they always had.
// The server's modules are imported when these commands run: the client commands never need them.
import { type Config, ConfigError, loadConfig } from '../../config.ts';
import { StartupError } from '../../startup-error.ts';
import type { CommandDefinition } from '../command.ts';
import { EXIT } from '../exit-codes.ts';
import { UsageError } from '../usage-error.ts';

const ADMIN_USAGE = `Usage:
  berth serve                          serve Berth (configured by BERTH_* environment variables)
  berth admin create-account --name <name> [--plan free|builder|platform-admin] [--json]
  berth admin create-key --account <accountId> --permission READ|WRITE [--json]
  berth admin revoke-key --id <keyId> [--json]
  berth admin list-keys --account <accountId> [--json]
  berth admin create-user --email <email> --account <accountId> --role ADMIN|MEMBER --password-stdin [--json]
  berth admin reset-password --email <email> [--json]
  berth admin set-storage-limit --account <accountId> --bytes <bytes>|default [--json]
  berth admin nodes [--json]           the nodes of the instance, their state and the site databases each holds
  berth admin backup <file> (--master-key-passphrase-stdin | --without-master-key) [--leave-blobs-in-store] [--without-replicas] [--json]
  berth admin restore <file> --data-dir <empty dir> [--master-key <file> | --master-key-passphrase-stdin] [--as-archived] [--json]
  berth admin copy-metadata --to postgres://user:password@host:5432/db [--json]
  berth admin copy-blobs --to s3://<bucket>[/<prefix>] [--json]   (endpoint and region from BERTH_S3_*)
Admin commands act on an existing data dir (BERTH_DATA_DIR); --create-data-dir lets them make a new one.
`;

/** Runs with the server's configuration, reporting its mistakes as before the client commands existed. */
async function withConfig(run: (config: Config) => Promise<number>): Promise<number> {
  try {
    return await run(loadConfig());
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`berth: ${err.message}\n\n${ADMIN_USAGE}`);
      return EXIT.USAGE;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`berth: configuration error: ${err.message}\n`);
      return EXIT.USAGE;
    }
    if (err instanceof StartupError) {
      process.stderr.write(`berth: ${err.message}\n`);
      return EXIT.FAILED;
    }
    throw err;
  }
}

export const serveCommand: CommandDefinition = {
  usage: 'serve',
  summary: 'serve Berth (configured by BERTH_* environment variables; see the README)',
  examples: ['berth serve', 'BERTH_PORT=9000 BERTH_DATA_DIR=/srv/berth berth serve'],
  json: false,
  run: () => withConfig(async (config) => (await import('../serve.ts')).serve(config)),
};

export const adminCommand: CommandDefinition = {
  usage: 'admin [command...]',
  summary:
    'operator commands on BERTH_DATA_DIR: create-account, create-key, revoke-key, list-keys, create-user, reset-password, set-storage-limit, nodes, backup, restore, copy-metadata, copy-blobs',
  examples: [
    'berth admin create-account --name "Team" --plan builder --json',
    'berth admin create-key --account <accountId> --permission WRITE --json',
    'berth admin revoke-key --id <keyId>',
    'berth admin list-keys --account <accountId>',
    'printf \'%s\' "$PASSWORD" | berth admin create-user --email ada@example.com --account <accountId> --role ADMIN --password-stdin --json',
    'berth admin reset-password --email ada@example.com',
    'berth admin set-storage-limit --account <accountId> --bytes 53687091200',
    'berth admin nodes',
    'berth admin backup /backups/berth-$(date +%F).tar --master-key-passphrase-stdin < /root/berth-passphrase',
    'berth admin restore /backups/berth-2026-11-23.tar --data-dir /var/lib/berth/data --master-key-passphrase-stdin < /root/berth-passphrase',
    'BERTH_S3_ENDPOINT=https://s3.example.com berth admin copy-blobs --to s3://berth-blobs/production',
  ],
  passThrough: true,
  run: ({ args }) => withConfig(async (config) => (await import('../admin.ts')).runAdmin(config, args)),
};
