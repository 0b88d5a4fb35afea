// Builds the `berth` command line from command definitions: commander parses, this file adds what every
// command shares (--json, --site, examples in the help, exit codes, the error display).
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { VERSION } from '../version.ts';
import { ApiClient } from './api-client.ts';
import { toCliError } from './cli-error.ts';
import type { CommandDefinition, CommandGroup, OptionDefinition } from './command.ts';
import { connectionFromEnv } from './connection.ts';
import { EXIT } from './exit-codes.ts';
import { Output } from './output.ts';
import { type Site, resolveSite } from './site.ts';
import { UsageError } from './usage-error.ts';

const ROOT_HELP = `
Environment:
  BERTH_URL       the server's address (default http://127.0.0.1:8080)
  BERTH_API_KEY   an API key of your account (a WRITE key to change anything); unset, the key berth login stored

Exit codes:
  0  done
  1  an operation failed (an API error, a failed deployment)
  2  a usage error
  3  the server cannot be reached, or it refused the API key`;

export class Program {
  readonly #root: Command;
  #exitCode: number = EXIT.OK;
  /** The first example of each command of a group, for the group's help. */
  readonly #groupExamples = new Map<Command, string[]>();

  constructor() {
    // Subcommands copy these settings when they are created, so they are set first.
    this.#root = new Command('berth')
      .description('Berth: static sites, sandboxed functions, cron jobs and a SQL database per site.')
      .version(VERSION, '-V, --version')
      .enablePositionalOptions()
      .exitOverride()
      .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'berth: ')) })
      .showHelpAfterError('(add --help for usage)')
      .addHelpText('after', ROOT_HELP);
  }

  /** Adds `berth <usage>`. */
  command(definition: CommandDefinition): this {
    this.#add(this.#root, definition);
    return this;
  }

  /** Adds `berth <group> <command>` for each definition; several calls may add to the same group. */
  group(group: CommandGroup): this {
    let parent = this.#root.commands.find((c) => c.name() === group.name);
    if (!parent) {
      const created = this.#root.command(group.name).summary(group.summary).description(group.summary);
      // Read when the help is shown, so that commands added to the group later are included.
      created.addHelpText(
        'after',
        () => `\nExamples:\n${(this.#groupExamples.get(created) ?? []).map((e) => `  $ ${e}`).join('\n')}\n`,
      );
      parent = created;
    }
    for (const definition of group.commands) {
      this.#add(parent, definition);
      this.#groupExamples.set(parent, [...(this.#groupExamples.get(parent) ?? []), definition.examples[0]!]);
    }
    return this;
  }

  /** Runs the command line and returns the exit code. */
  async run(argv: string[]): Promise<number> {
    this.#exitCode = EXIT.OK;
    try {
      await this.#root.parseAsync(argv, { from: 'user' });
      return this.#exitCode;
    } catch (err) {
      if (!(err instanceof CommanderError)) throw err;
      // Help asked for, or the version, is a success; help shown for want of a command is not.
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? EXIT.OK : EXIT.USAGE;
    }
  }

  #add(parent: Command, definition: CommandDefinition): void {
    const command = parent.command(definition.usage).summary(definition.summary).description(definition.summary);
    for (const option of definition.options ?? []) addOption(command, option);
    if (definition.site) command.requiredOption('--site <site>', 'the site: its id or its subdomain');
    if (definition.passThrough) command.passThroughOptions().allowUnknownOption().allowExcessArguments();
    else if (definition.json !== false) command.option('--json', 'print the answer as JSON');
    command.addHelpText('after', `\nExamples:\n${definition.examples.map((e) => `  $ ${e}`).join('\n')}\n`);
    command.action(async () => {
      const options = command.opts();
      const out = new Output(options.json === true);
      const args = definition.passThrough ? command.args : command.processedArgs.filter((a) => a !== undefined).flat();
      this.#exitCode = await runCommand(definition, out, args, options, command);
    });
  }
}

async function runCommand(
  definition: CommandDefinition,
  out: Output,
  args: string[],
  options: Record<string, unknown>,
  command: Command,
): Promise<number> {
  let api: ApiClient | undefined;
  let site: Promise<Site> | undefined;
  const client = () => (api ??= new ApiClient(connectionFromEnv()));
  try {
    const code = await definition.run({
      args,
      options,
      out,
      api: client,
      site: () => (site ??= resolveSite(client(), String(options.site))),
    });
    return code ?? EXIT.OK;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`berth: ${err.message}\n(see \`${commandPath(command)} --help\`)\n`);
      return EXIT.USAGE;
    }
    const failure = toCliError(err);
    out.error(failure);
    return failure.exitCode;
  }
}

/** `berth db migrate` for the migrate command of the db group. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

function addOption(command: Command, definition: OptionDefinition): void {
  const option = new Option(definition.flags, definition.description);
  if (definition.default !== undefined) option.default(definition.default);
  const parse = definition.parse;
  if (parse) {
    option.argParser((value: string) => {
      try {
        return parse(value);
      } catch (err) {
        if (err instanceof UsageError) throw new InvalidArgumentError(err.message);
        throw err;
      }
    });
  }
  command.addOption(option);
}
