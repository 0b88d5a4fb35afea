// `berth init`: a new project folder with a page, two functions sharing a module in lib/, a deno.json,
// a first migration and a README.
import fs from 'node:fs/promises';
import path from 'node:path';
import { CliError } from '../cli-error.ts';
import type { CommandDefinition } from '../command.ts';

const TEMPLATE = path.resolve(import.meta.dirname, '../templates/project');
const CONTRACT = path.resolve(import.meta.dirname, '../../../runtime-host/context-contract.ts');
/** Editor types of ctx at the project's root: deno.json names them for every file, a function by a comment. */
const TYPES_FILE = 'berth.d.ts';

/**
 * The runtime contract's types as global declarations, so a function needs no import for them:
 * `/// <reference path="../berth.d.ts" />` (or deno.json's `compilerOptions.types`) is a type source to
 * editors and `deno check`, and nothing to the runtime. The file is not deployed.
 */
async function contextTypes(): Promise<string> {
  const source = await fs.readFile(CONTRACT, 'utf8');
  const types = source.slice(source.indexOf('export type SqlParam')).replace(/^export /gm, '');
  return `// The types of Berth's ctx, for editors: made by \`berth init\` from Berth's runtime contract.\n\n${types}`;
}

async function templateFiles(dir: string, prefix = ''): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const relative = path.posix.join(prefix, entry.name);
    if (entry.isDirectory()) files.push(...(await templateFiles(path.join(dir, entry.name), relative)));
    else files.push(relative);
  }
  return files.sort();
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

export const initCommand: CommandDefinition = {
  usage: 'init <dir>',
  summary:
    'create a project folder: web/index.html, api/hello.ts and api/goodbye.ts sharing lib/greeting.ts, deno.json, migrations/0001_init.sql, editor types of ctx and a README',
  examples: ['berth init my-site', 'berth init .   # in an empty folder'],
  async run({ args, out }) {
    const dir = args[0]!;
    const files = [...(await templateFiles(TEMPLATE)), TYPES_FILE].sort();
    const taken = [];
    for (const file of files) if (await exists(path.join(dir, file))) taken.push(file);
    if (taken.length > 0)
      throw new CliError(`${dir} already has ${taken.join(', ')}; nothing was written`, { code: 'already_exists' });
    for (const file of files) {
      await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      if (file === TYPES_FILE) await fs.writeFile(path.join(dir, file), await contextTypes(), { flag: 'wx' });
      else await fs.copyFile(path.join(TEMPLATE, file), path.join(dir, file), fs.constants.COPYFILE_EXCL);
    }
    out.print(
      { dir: path.resolve(dir), files },
      [
        `Created ${files.map((f) => path.join(dir, f)).join(', ')}`,
        '',
        'Next, with a site of yours (its subdomain or id):',
        '  export BERTH_URL=http://127.0.0.1:8080   # your server',
        '  export BERTH_API_KEY=<a WRITE key>',
        `  npx berth deploy ${dir} --site <site>`,
        `  npx berth db migrate ${dir} --site <site>`,
      ].join('\n'),
    );
  },
};
