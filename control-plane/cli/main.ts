// `berth serve` and `berth admin …`: argument parsing and output only; the work is in the services.
import { ConfigError, loadConfig } from '../config.ts';
import { runAdmin } from './admin.ts';
import { serve } from './serve.ts';
import { UsageError } from './usage-error.ts';

const USAGE = `Usage:
  berth serve                          serve Berth (configured by BERTH_* environment variables)
  berth admin create-account --name <name> [--plan free|builder|platform-admin] [--json]
  berth admin create-key --account <accountId> --permission READ|WRITE [--json]
  berth admin revoke-key --id <keyId> [--json]
  berth admin list-keys --account <accountId> [--json]
`;

/** Runs one command and returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    const config = loadConfig();
    if (command === 'serve' && rest.length === 0) return await serve(config);
    if (command === 'admin') return await runAdmin(config, rest);
    if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    }
    throw new UsageError(`unknown command "${argv.join(' ')}"`);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`berth: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`berth: configuration error: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}
