// A command as data: commands and command groups are lists of these, and program.ts turns them into
// the `berth` command line with help, examples, --json and --site.
import type { ApiClient } from './api-client.ts';
import type { Output } from './output.ts';
import type { Site } from './site.ts';

export interface OptionDefinition {
  /** commander's syntax: `--out <file>`, `--yes`. */
  flags: string;
  description: string;
  default?: string | number | boolean;
  /** Turns the text into the option's value; throws a UsageError when it cannot. */
  parse?: (value: string) => unknown;
}

export interface CommandDefinition {
  /** The name and its arguments in commander's syntax: `deploy <dir>`, `set <name>`. */
  usage: string;
  summary: string;
  /** Shown under "Examples:" in the command's help; every command has some. */
  examples: string[];
  options?: OptionDefinition[];
  /** Takes `--site <id or subdomain>`, resolved by `context.site()`. */
  site?: boolean;
  /** `false` for the one command that prints no answer of its own (`berth serve`). */
  json?: boolean;
  /** Hands every argument after the name, options included, to `run` as `args` (`berth admin`). */
  passThrough?: boolean;
  /** Returns the exit code; nothing means 0. */
  // biome-ignore lint/suspicious/noConfusingVoidType: a command's run that returns nothing exits 0
  run(context: CommandContext): Promise<number | void>;
}

export interface CommandContext {
  /** The positional arguments, in order. */
  args: string[];
  options: Record<string, unknown>;
  out: Output;
  /** The API client for BERTH_URL and BERTH_API_KEY, made on first use. */
  api(): ApiClient;
  /** The site that --site names, looked up once. */
  site(): Promise<Site>;
}

export interface CommandGroup {
  /** `berth <name> <command>`. */
  name: string;
  summary: string;
  commands: CommandDefinition[];
}
