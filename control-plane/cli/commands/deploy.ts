// `berth deploy` and `berth watch`: publish a project folder to a site as a deployment, once or on
// every change.
import type { CommandDefinition } from '../command.ts';
import { toCliError } from '../cli-error.ts';
import { type DeployProgress, type DeployResult, deploy, deployFailed } from '../deploy/deploy.ts';
import { LocalDigests } from '../deploy/local-digests.ts';
import { deployReport } from '../deploy/report.ts';
import { watchFolder } from '../deploy/watch.ts';
import { EXIT } from '../exit-codes.ts';
import type { Output } from '../output.ts';

const DELETE_OPTION = {
  flags: '--delete',
  description:
    'also remove the site’s files that are gone locally, in the folders the project has (web/, api/, cron/, lib/ in the same deployment; data/ files through the file API); a deno.json or deno.lock the project lacks stays',
};

/** One line per file on stderr; on a terminal, a counter instead. */
function progress(out: Output): DeployProgress {
  return {
    checked: (done, total) => out.status(`checking ${done}/${total}`),
    created: (deployment, missing, files) =>
      out.note(`deployment ${deployment.shortId}: ${missing} of ${files} files to upload`),
    done: (path, outcome, detail, count, total) => {
      if (out.interactive) out.status(`[${count}/${total}] ${path}`);
      else if (outcome === 'uploaded') out.note(`uploaded ${path} (${detail})`);
      else if (outcome === 'deleted') out.note(`deleted ${path}`);
      else out.note(`failed ${path}: ${detail}`);
    },
  };
}

const didSomething = (result: DeployResult) =>
  result.deployment !== null ||
  result.savedLock !== null ||
  result.deleted.length + result.uploaded.length + result.failed.length > 0;

export const deployCommand: CommandDefinition = {
  usage: 'deploy <dir>',
  summary:
    'publish a project folder’s web/, api/, cron/, lib/, deno.json and deno.lock to a site as one deployment (only bytes the server lacks are sent), then write its data/ files through the file API and save the site’s deno.lock into the folder when it differs',
  examples: [
    'berth deploy . --site hello',
    'berth deploy ./my-site --site hello --delete --message "new home page"',
    'berth deploy . --site hello --preview        # uploads, prints the preview URL, publishes nothing',
    'berth deploy . --site 3c68b544-2f0e-4e0f-9d55-0c1f7f5e2a10 --json',
  ],
  site: true,
  options: [
    DELETE_OPTION,
    { flags: '--message <text>', description: 'a note kept with the deployment in the site’s history' },
    {
      flags: '--preview',
      description:
        'upload without publishing: the deployment is served at its preview URL only, until `berth deployments publish <id>` (data/ is not written)',
    },
  ],
  async run({ args, options, out, api, site }) {
    const result = await deploy(api(), await site(), args[0]!, {
      deleteMissing: options.delete === true,
      preview: options.preview === true,
      ...(typeof options.message === 'string' ? { message: options.message } : {}),
      progress: progress(out),
    });
    out.print(result, deployReport(result));
    return deployFailed(result) ? EXIT.FAILED : EXIT.OK;
  },
};

/** `watch: web/index.html, api/when.ts`, the note a watcher's deployment carries in the history. */
function watchMessage(changed: Set<string> | undefined): string {
  if (!changed) return 'berth watch';
  const paths = [...changed].sort();
  return `berth watch: ${paths.slice(0, 5).join(', ')}${paths.length > 5 ? ` and ${paths.length - 5} more` : ''}`;
}

export const watchCommand: CommandDefinition = {
  usage: 'watch <dir>',
  summary:
    'deploy a project folder, then deploy again each time files change (each batch one deployment), until Ctrl-C',
  examples: ['berth watch . --site hello', 'berth watch ./my-site --site hello --delete --json'],
  site: true,
  options: [DELETE_OPTION],
  async run({ args, options, out, api, site }) {
    const dir = args[0]!;
    const client = api();
    const target = await site();
    const digests = new LocalDigests();
    const deployOnce = async (changed?: Set<string>) => {
      const result = await deploy(client, target, dir, {
        deleteMissing: options.delete === true,
        preview: false,
        message: watchMessage(changed),
        progress: progress(out),
        digests,
      });
      if (!changed || didSomething(result)) out.print(result, deployReport(result));
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
