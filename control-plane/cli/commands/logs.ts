// `berth logs`: the console output of a site's functions, and with --follow the lines that come next,
// from the live log stream.
import { setTimeout as sleep } from 'node:timers/promises';
import type { FunctionLogLine } from '../../logs/function-logs.ts';
import type { ApiClient } from '../api-client.ts';
import { ApiError } from '../cli-error.ts';
import type { CommandDefinition } from '../command.ts';
import type { Output } from '../output.ts';
import { UsageError } from '../usage-error.ts';

/** The pause before a dropped stream is opened again. */
const RECONNECT_MS = 1000;
const LEVELS = ['debug', 'info', 'warn', 'error'];

type Filter = { function?: string; level?: string };

const format = (line: FunctionLogLine) =>
  `${line.createdAt} ${line.level.padEnd(5)} ${line.functionPath ?? '-'}  ${line.message}`;

function lineCount(value: string): number {
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1 || count > 1000)
    throw new UsageError('--lines must be a whole number from 1 to 1000');
  return count;
}

function level(value: string): string {
  if (!LEVELS.includes(value)) throw new UsageError(`--level must be one of ${LEVELS.join(', ')}`);
  return value;
}

/** Lines newer than `after`, oldest first, at most `max`: the API lists the newest first. */
async function newLines(
  api: ApiClient,
  siteId: string,
  filter: Filter,
  after: number,
  max = Infinity,
): Promise<FunctionLogLine[]> {
  const lines: FunctionLogLine[] = [];
  for await (const line of api.list<FunctionLogLine>(`sites/${siteId}/logs`, 'logs', filter)) {
    if (line.id <= after || lines.length >= max) break;
    lines.push(line);
  }
  return lines.reverse();
}

/** Prints the stream's lines after `last` until Ctrl-C; a dropped stream is opened again where it left off. */
async function follow(api: ApiClient, siteId: string, filter: Filter, out: Output, last: number): Promise<void> {
  const stop = new AbortController();
  const end = () => stop.abort();
  process.once('SIGINT', end);
  process.once('SIGTERM', end);
  try {
    while (!stop.signal.aborted) {
      try {
        for await (const event of api.events(`sites/${siteId}/logs/stream`, filter, String(last), stop.signal)) {
          if (event.event !== 'log') continue;
          const line = JSON.parse(event.data) as FunctionLogLine;
          out.print(line, format(line));
          last = line.id;
        }
      } catch (err) {
        if (stop.signal.aborted) break;
        // A refusal (the key, the site, the stream limit) is the answer; anything else is a dropped connection.
        if (err instanceof ApiError) throw err;
      }
      await sleep(RECONNECT_MS, undefined, { signal: stop.signal }).catch(() => {});
    }
  } finally {
    process.off('SIGINT', end);
    process.off('SIGTERM', end);
  }
}

export const logsCommand: CommandDefinition = {
  usage: 'logs',
  summary: 'print the console output of the site’s functions, oldest first; --follow keeps printing new lines',
  examples: [
    'berth logs --site hello',
    'berth logs --site hello --lines 200',
    'berth logs --site hello --follow',
    'berth logs --site hello --follow --function api/checkout.ts --level error',
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
      description: 'keep printing new lines as they are logged, until Ctrl-C (with --json, one JSON object per line)',
    },
    { flags: '--function <path>', description: 'only lines of this function (api/hello.ts)' },
    { flags: '--level <level>', description: `only lines of this level (${LEVELS.join(', ')})`, parse: level },
  ],
  async run({ options, out, api, site }) {
    const client = api();
    const { id } = await site();
    const filter: Filter = {
      ...(options.function ? { function: options.function as string } : {}),
      ...(options.level ? { level: options.level as string } : {}),
    };
    const recent = await newLines(client, id, filter, 0, options.lines as number);
    if (!options.follow) {
      if (recent.length === 0 && !out.json) out.note('no log lines yet');
      out.print({ logs: recent }, recent.map(format).join('\n'));
      return;
    }
    for (const line of recent) out.print(line, format(line));
    await follow(client, id, filter, out, recent.at(-1)?.id ?? 0);
  },
};
