// What a build reads of a site's files: the functions and cron jobs it builds, the modules they may
// import (under lib/, and files or folders under api/ and cron/ whose names start with "_"), and the
// site's deno.json and deno.lock. Nothing else of the site reaches the build's folder, so nothing else
// can be imported.
import { isSharedModule } from '../../runtime-host/validate.ts';

export const BUILD_CONFIG_FILES = ['deno.json', 'deno.lock'] as const;

const MODULE_FILE = /\.(ts|js|mjs|json)$/;

/** A module functions may import, or a file that configures their builds. */
export const isBuildInput = (path: string): boolean =>
  (BUILD_CONFIG_FILES as readonly string[]).includes(path) ||
  (MODULE_FILE.test(path) && (path.startsWith('lib/') || isSharedModule(path)));
