// `berth logs`: the console output of a site's functions, and with --follow the lines that come next.
import type { FunctionLogLine } from '../../services/function-logs.ts';
import type { ApiClient } from '../api-client.ts';
import type { CommandDefinition } from '../command.ts';
import type { Output } from '../output.ts';
import { UsageError } from '../usage-error.ts';

const POLL_MS = 1000;

const format = (line: FunctionLogLine) =>
  `${line.createdAt} ${line.level.padEnd(5)} ${line.functionPath ?? '-'}  ${line.message}`;

function lineCount(value: string): number {
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1 || count > 1000)
    throw new UsageError('--lines must be a whole number from 1 to 1000');
  return count;
}

/** Lines newer than `after`, oldest first, at most `max`: the API lists the newest first. */
async function newLines(api: ApiClient, siteId: string, after: number, max = Infinity): Promise<FunctionLogLine[]> {
  const lines: FunctionLogLine[] = [];
  for await (const line of api.list<FunctionLogLine>(`sites/${siteId}/logs`, 'logs')) {
    if (line.id <= after || lines.length >= max) break;
    lines.push(line);
  }
  return lines.reverse();
}

async function follow(api: ApiClient, siteId: string, out: Output, last: number): Promise<void> {
  let wake: () => void = () => {};
  let stop = false;
  const end = () => {
    stop = true;
    wake();
  };
  process.once('SIGINT', end);
  process.once('SIGTERM', end);
  while (!stop) {
    for (const line of await newLines(api, siteId, last)) {
      out.print(line, format(line));
      last = line.id;
    }
    if (stop) break;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, POLL_MS);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

export const logsCommand: CommandDefinition = {
  usage: 'logs',
  summary: 'print the console output of the site’s functions, oldest first; --follow keeps printing new lines',
  examples: [
    'berth logs --site hello',
    'berth logs --site hello --lines 200',
    'berth logs --site hello --follow',
    'berth logs --site hello --follow --json | jq .message',
  ],
  site: true,
  options: [
    {
      flags: '-n, --lines <count>',
      description: 'how many recent lines to print first (1–1000)',
      default: 50,
      parse: lineCount,
    },
    {
      flags: '-f, --follow',
      description: 'keep printing new lines until Ctrl-C (with --json, one JSON object per line)',
    },
  ],
  async run({ options, out, api, site }) {
    const client = api();
    const { id } = await site();
    const recent = await newLines(client, id, 0, options.lines as number);
    if (!options.follow) {
      if (recent.length === 0 && !out.json) out.note('no log lines yet');
      out.print({ logs: recent }, recent.map(format).join('\n'));
      return;
    }
    for (const line of recent) out.print(line, format(line));
    await follow(client, id, out, recent.at(-1)?.id ?? 0);
  },
};
