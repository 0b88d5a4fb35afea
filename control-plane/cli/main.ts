// The `berth` command line: the operator's commands, and the client commands that drive a server
// through its API.
import { dbDeleteCommand, dbMigrateCommand, dbRestoreCommand } from './commands/db.ts';
import { dbExportCommand } from './commands/db-export.ts';
import { deployCommand, watchCommand } from './commands/deploy.ts';
import { deploymentsPublishCommand, rollbackCommand } from './commands/deployments.ts';
import { initCommand } from './commands/init.ts';
import { filesGetCommand, filesPutCommand } from './commands/files.ts';
import { loginCommand, logoutCommand } from './commands/login.ts';
import { logsCommand } from './commands/logs.ts';
import { mcpCommand } from './commands/mcp.ts';
import { adminCommand, serveCommand } from './commands/operator.ts';
import { secretsSetCommand } from './commands/secrets.ts';
import { statsCommand } from './commands/stats.ts';
import { Program } from './program.ts';

/** Commands generated from the operation catalogue load the server's modules: only when they may run. */
const CATALOGUE_WORDS = new Set(['sites', 'domains', 'files', 'secrets', 'deployments', 'db', 'whoami']);

export async function berthProgram(argv: string[] = []): Promise<Program> {
  const program = baseProgram();
  const first = argv.find((word) => !word.startsWith('-'));
  if (first === undefined || first === 'help' || CATALOGUE_WORDS.has(first)) {
    const { catalogueCommands } = await import('./commands/catalogue.ts');
    const { groups, commands } = catalogueCommands();
    for (const command of commands) program.command(command);
    for (const group of groups) program.group(group);
  }
  return program;
}

function baseProgram(): Program {
  return new Program()
    .command(initCommand)
    .command(deployCommand)
    .command(watchCommand)
    .group({
      name: 'deployments',
      summary: 'the site’s deployments: every change to its files, previews, and going back',
      commands: [deploymentsPublishCommand],
    })
    .command(rollbackCommand)
    .command(logsCommand)
    .command(statsCommand)
    .group({ name: 'files', summary: 'the files of a site’s bucket', commands: [filesPutCommand, filesGetCommand] })
    .group({
      name: 'secrets',
      summary: 'the site’s secrets, read by its functions with ctx.secrets',
      commands: [secretsSetCommand],
    })
    .group({
      name: 'db',
      summary: 'the site’s SQL database',
      commands: [dbMigrateCommand, dbExportCommand, dbRestoreCommand, dbDeleteCommand],
    })
    .command(loginCommand)
    .command(logoutCommand)
    .command(mcpCommand)
    .command(serveCommand)
    .command(adminCommand);
}

/** Runs one command line and returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  return (await berthProgram(argv)).run(argv);
}
