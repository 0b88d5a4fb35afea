// The paths a deployment owns whole: its prune removes those its set lacks, and an uploading preview
// that prunes takes them only from its set. The site's pages, functions and cron jobs, the modules its
// functions share (lib/), and at the root exactly the import map and the lock file of their packages
// (deno.json, deno.lock). data/ is the functions' own; any other path is private storage a deployment
// may carry but never removes.
const PRUNED_FOLDERS = ['web/', 'api/', 'cron/', 'lib/'];
const PRUNED_ROOT_FILES = new Set(['deno.json', 'deno.lock']);

export const isPrunedPath = (path: string): boolean =>
  PRUNED_ROOT_FILES.has(path) || PRUNED_FOLDERS.some((folder) => path.startsWith(folder));
