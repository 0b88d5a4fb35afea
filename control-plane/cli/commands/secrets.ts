// `berth secrets set`: the value comes from stdin (or a hidden prompt), never from argv, where other
// users' `ps` and the shell's history would see it.
import type { CommandDefinition } from '../command.ts';
import { ask, readStdin, stdinIsTerminal } from '../terminal.ts';
import { UsageError } from '../usage-error.ts';

async function readValue(name: string): Promise<string> {
  if (stdinIsTerminal()) return ask(`Value of ${name} (not shown): `, { hidden: true });
  // `echo value | berth secrets set` sends a newline that is not part of the value.
  return (await readStdin()).replace(/\r?\n$/, '');
}

export const secretsSetCommand: CommandDefinition = {
  usage: 'set <name>',
  summary: 'create or replace a secret of the site, reading its value from stdin',
  examples: [
    'berth secrets set STRIPE_KEY --site hello          # asks for the value without showing it',
    'printf %s "$STRIPE_KEY" | berth secrets set STRIPE_KEY --site hello',
    'berth secrets set SERVICE_ACCOUNT --site hello < service-account.json',
  ],
  site: true,
  async run({ args, out, api, site }) {
    const name = args[0]!;
    const target = await site();
    const value = await readValue(name);
    if (value === '')
      throw new UsageError(
        `no value for ${name}: give it on stdin, e.g. printf %s "$VALUE" | berth secrets set ${name} --site <site>`,
      );
    const answer = await api().post<{ secret: { name: string; updatedAt: string } }>(`sites/${target.id}/secrets`, {
      name,
      value,
    });
    out.print(answer, `Set secret ${answer.secret.name} of ${target.subdomain}`);
  },
};
