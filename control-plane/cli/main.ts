// The `berth` command line: the operator's commands, and the client commands that drive a server
// through its API.
import { dbDeleteCommand, dbMigrateCommand } from './commands/db.ts';
import { dbExportCommand } from './commands/db-export.ts';
import { deployCommand, watchCommand } from './commands/deploy.ts';
import { initCommand } from './commands/init.ts';
import { logsCommand } from './commands/logs.ts';
import { adminCommand, serveCommand } from './commands/operator.ts';
import { secretsSetCommand } from './commands/secrets.ts';
import { Program } from './program.ts';

export function berthProgram(): Program {
  return new Program()
    .command(initCommand)
    .command(deployCommand)
    .command(watchCommand)
    .command(logsCommand)
    .group({ name: 'secrets', summary: 'the site’s secrets, read by its functions with ctx.secrets', commands: [secretsSetCommand] })
    .group({ name: 'db', summary: 'the site’s SQL database', commands: [dbMigrateCommand, dbExportCommand, dbDeleteCommand] })
    .command(serveCommand)
    .command(adminCommand);
}

/** Runs one command line and returns the process exit code. */
export function main(argv: string[]): Promise<number> {
  return berthProgram().run(argv);
}
