// `berth files put|get`: one file's raw bytes in or out, streamed (the other file commands come from
// the operation catalogue).
import fs from 'node:fs';
import { encodePath } from '../api-client.ts';
import type { CommandDefinition } from '../command.ts';
import { contentTypeFor } from '../deploy/content-types.ts';
import { formatAnswer } from './answer.ts';

interface Written {
  path: string;
  versionId: string;
  bytes: number;
  deployment?: { status: string; error?: { message: string; line: number; column: number } };
}

export const filesPutCommand: CommandDefinition = {
  usage: 'put <local> <path>',
  summary: 'upload a local file as a new version of <path> in the site’s bucket',
  examples: [
    'berth files put ./index.html web/index.html --site blog',
    'berth files put hello.ts api/hello.ts --site blog --json',
  ],
  site: true,
  options: [
    { flags: '--content-type <type>', description: 'stored and served as given (default: from the file name)' },
    { flags: '--if-match <versionId>', description: 'write only if this version is still the current one' },
  ],
  run: async (context) => {
    const [local, path] = context.args as [string, string];
    const bytes = fs.statSync(local).size;
    const site = await context.site();
    const written = await context
      .api()
      .put<Written>(`buckets/${site.bucketId}/objects/${encodePath(path)}`, fs.createReadStream(local), {
        contentType: (context.options.contentType as string | undefined) ?? contentTypeFor(path),
        bytes,
        ...(context.options.ifMatch ? { ifMatch: context.options.ifMatch as string } : {}),
      });
    context.out.print(written, formatAnswer(written));
    // A function source that did not deploy is a failed upload for scripts.
    if (written.deployment?.status === 'FAILED') return 1;
  },
};

export const filesGetCommand: CommandDefinition = {
  usage: 'get <path>',
  summary: 'print a file’s current bytes, or save them with --out',
  examples: [
    'berth files get web/index.html --site blog',
    'berth files get data/export.json --site blog --out export.json',
  ],
  site: true,
  json: false,
  options: [{ flags: '--out <file>', description: 'write the bytes to this file instead of stdout' }],
  run: async (context) => {
    const site = await context.site();
    const out = context.options.out as string | undefined;
    await context
      .api()
      .download(
        `buckets/${site.bucketId}/objects/${encodePath(context.args[0]!)}`,
        out ? fs.createWriteStream(out) : process.stdout,
      );
  },
};
