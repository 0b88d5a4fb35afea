// `berth deploy` and `berth watch`: publish a project folder to a site, once or on every change.
import type { CommandDefinition } from '../command.ts';
import { toCliError } from '../cli-error.ts';
import { type DeployProgress, deploy, deployFailed } from '../deploy/deploy.ts';
import { deployReport } from '../deploy/report.ts';
import { watchFolder } from '../deploy/watch.ts';
import { EXIT } from '../exit-codes.ts';
import type { Output } from '../output.ts';

const DELETE_OPTION = {
  flags: '--delete',
  description: 'also delete the site’s files that are gone locally (only in the folders the project has)',
};

/** One line per file on stderr; on a terminal, a counter instead. */
function progress(out: Output): DeployProgress {
  return {
    checked: (done, total) => out.status(`checking ${done}/${total}`),
    done: (path, outcome, detail, count, total) => {
      if (out.interactive) out.status(`[${count}/${total}] ${path}`);
      else if (outcome === 'uploaded') out.note(`uploaded ${path} (${detail})`);
      else if (outcome === 'deleted') out.note(`deleted ${path}`);
      else out.note(`failed ${path}: ${detail}`);
    },
  };
}

export const deployCommand: CommandDefinition = {
  usage: 'deploy <dir>',
  summary: 'upload a project folder’s web/, api/, cron/ and data/ to a site; only changed files are sent',
  examples: [
    'berth deploy . --site hello',
    'berth deploy ./my-site --site hello --delete',
    'berth deploy . --site 3c68b544-2f0e-4e0f-9d55-0c1f7f5e2a10 --json',
  ],
  site: true,
  options: [DELETE_OPTION],
  async run({ args, options, out, api, site }) {
    const result = await deploy(api(), await site(), args[0]!, {
      deleteMissing: options.delete === true,
      progress: progress(out),
    });
    out.print(result, deployReport(result));
    return deployFailed(result) ? EXIT.FAILED : EXIT.OK;
  },
};

export const watchCommand: CommandDefinition = {
  usage: 'watch <dir>',
  summary: 'deploy a project folder, then deploy again each time a file changes, until Ctrl-C',
  examples: ['berth watch . --site hello', 'berth watch ./my-site --site hello --delete --json'],
  site: true,
  options: [DELETE_OPTION],
  async run({ args, options, out, api, site }) {
    const dir = args[0]!;
    const client = api();
    const target = await site();
    const deployOnce = async (only?: Set<string>) => {
      const result = await deploy(client, target, dir, {
        only,
        deleteMissing: options.delete === true,
        progress: progress(out),
      });
      if (!only || result.uploaded.length + result.deleted.length + result.failed.length > 0)
        out.print(result, deployReport(result));
    };
    await deployOnce();
    await watchFolder(dir, {
      deploy: (changed) =>
        deployOnce(changed).catch((err: unknown) => {
          // The server restarting or a half-saved file is no reason to stop watching: the next change retries.
          out.error(toCliError(err));
        }),
      ready: () => out.note(`watching ${dir} for changes (Ctrl-C to stop)`),
    });
    return EXIT.OK;
  },
};
