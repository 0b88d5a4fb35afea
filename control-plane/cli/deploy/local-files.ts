// The files a deploy publishes: everything under the project's web/, api/, cron/, lib/ and data/
// folders, and at its root deno.json and deno.lock (the functions' import map and the versions of
// their packages). data/ is the functions' own: it is written through the file API, never part of a
// deployment. Symbolic links are followed only while they stay inside the project, so a deploy can
// never publish a file from elsewhere on the machine (a link to ~/.ssh, a folder linked to "..").
import fs from 'node:fs/promises';
import path from 'node:path';
import { CliError } from '../cli-error.ts';

export const DEPLOYED_FOLDERS = ['web', 'api', 'cron', 'lib', 'data'] as const;
export const DEPLOYED_ROOT_FILES = ['deno.json', 'deno.lock'] as const;

/** The deployed folder or root file a path is part of: `web` for `web/index.html`, `deno.json` for itself. */
export const partOf = (filePath: string) => filePath.split('/')[0]!;

/** A path, relative to the project's root, that a deploy reads (or a deployed folder itself). */
export const isDeployedPath = (filePath: string) =>
  (DEPLOYED_FOLDERS as readonly string[]).includes(partOf(filePath)) ||
  (DEPLOYED_ROOT_FILES as readonly string[]).includes(filePath);

/** A path of the functions' own data, which deployments leave alone. */
export const isData = (filePath: string) => filePath.startsWith('data/');

export interface LocalFile {
  /** Its path in the bucket, e.g. `web/index.html`. */
  path: string;
  /** Where to read it. */
  absolute: string;
  bytes: number;
  /** When it last changed: a digest computed before is reused while size and time stay the same. */
  mtimeMs: number;
}

export interface LocalTree {
  root: string;
  files: Map<string, LocalFile>;
  /**
   * Which of the deployed folders and root files the project has. --delete removes only the site's
   * files of these: a part the project lacks is not its to manage. A root file it lacks counts as a
   * folder it lacks, for the same reason: its absence says nothing of the site. A project of pages
   * alone must not take away the import map of functions deployed from another, and a checkout
   * without deno.lock must not drop the versions the site is pinned to (the deploy saves the site's
   * lock into the project instead); `berth files rm deno.json` removes one on purpose.
   */
  parts: Set<string>;
}

/** Files editors and file managers leave behind, never meant to be published. */
export const isJunk = (name: string) => /^(\.DS_Store|Thumbs\.db)$|~$|^\.#|^\..*\.sw[a-p]$/.test(name);

// The API refuses these in paths; saying so before anything is uploaded is clearer.
const UNUPLOADABLE = /[\\\u0000-\u001f\u007f]/;

export async function readLocalTree(dir: string): Promise<LocalTree> {
  const root = await projectRoot(dir);
  const tree: LocalTree = { root, files: new Map(), parts: new Set() };
  const seenDirs = new Set<string>();

  const visit = async (absolute: string, remote: string): Promise<void> => {
    let target = absolute;
    let stat = await fs.lstat(absolute).catch((err: NodeJS.ErrnoException) => {
      // Gone since its folder was read: an editor's temporary file, saved over the real one.
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (!stat) return;
    if (stat.isSymbolicLink()) {
      target = await inside(root, absolute, remote);
      stat = await fs.stat(target);
    }
    if (stat.isDirectory()) {
      const real = await fs.realpath(target);
      if (seenDirs.has(real)) return;
      seenDirs.add(real);
      for (const entry of await fs.readdir(target)) {
        if (!isJunk(entry)) await visit(path.join(target, entry), `${remote}/${entry}`);
      }
    } else if (stat.isFile()) {
      if (UNUPLOADABLE.test(remote)) {
        throw new CliError(
          `cannot upload ${JSON.stringify(remote)}: file paths may not hold backslashes or control characters`,
          { code: 'invalid_path' },
        );
      }
      tree.files.set(remote, { path: remote, absolute: target, bytes: stat.size, mtimeMs: stat.mtimeMs });
    }
  };

  for (const folder of DEPLOYED_FOLDERS) {
    const absolute = path.join(root, folder);
    if (!(await exists(absolute))) continue;
    if (!(await fs.stat(absolute)).isDirectory())
      throw new CliError(`${folder} in ${root} is not a folder`, { code: 'not_a_folder' });
    tree.parts.add(folder);
    await visit(absolute, folder);
  }
  for (const name of DEPLOYED_ROOT_FILES) {
    const absolute = path.join(root, name);
    if (!(await exists(absolute))) continue;
    // A link is checked by visit(): it must stay inside the project.
    const stat = await fs.stat(absolute).catch(() => undefined);
    if (stat && !stat.isFile()) throw new CliError(`${name} in ${root} is not a file`, { code: 'not_a_file' });
    tree.parts.add(name);
    await visit(absolute, name);
  }
  return tree;
}

async function projectRoot(dir: string): Promise<string> {
  try {
    const root = await fs.realpath(dir);
    if ((await fs.stat(root)).isDirectory()) return root;
  } catch {
    // reported below
  }
  throw new CliError(`${dir} is not a folder`, {
    code: 'not_a_folder',
    hint: 'Give the project folder that holds web/, api/, cron/, lib/ or data/.',
  });
}

/** The real path of a link, when it stays inside the project. */
async function inside(root: string, link: string, remote: string): Promise<string> {
  let real: string;
  try {
    real = await fs.realpath(link);
  } catch {
    throw new CliError(`${remote} is a symbolic link to nothing (${await fs.readlink(link)})`, { code: 'broken_link' });
  }
  if (real !== root && !real.startsWith(root + path.sep)) {
    throw new CliError(
      `${remote} links to ${real}, outside ${root}: a deploy publishes only files inside the project folder`,
      {
        code: 'path_outside_folder',
        hint: 'Copy the file into the folder, or remove the link.',
      },
    );
  }
  return real;
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.lstat(file);
    return true;
  } catch {
    return false;
  }
}
