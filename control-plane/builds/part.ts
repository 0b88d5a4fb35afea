// The builds' part of a start: where this node builds (its package cache is kept between starts unless
// it has grown past PACKAGE_CACHE_MAX_BYTES, the folders of builds a stop or a kill interrupted are
// removed), how many builds it runs at once (one per core), and its job forgetting builds and packages
// no site holds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { opened, type Part } from '../part.ts';
import { BuildSlots } from './build-slots.ts';
import { UnusedBuilds } from './unused-builds.ts';

/**
 * The most the builder's npm cache keeps between starts: it only mirrors tarballs the blob store keeps
 * (each charged to an account while a site holds it), and the registry front fills it again from there,
 * so past this it is emptied rather than left to grow with every package ever built.
 */
const PACKAGE_CACHE_MAX_BYTES = 2 * 1024 ** 3;

/** The bytes of the files under `dir`. */
function folderBytes(dir: string): number {
  let bytes = 0;
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true }))
    if (entry.isFile()) bytes += fs.statSync(path.join(entry.parentPath, entry.name)).size;
  return bytes;
}

export const buildsPart: Part = {
  name: 'the builds',
  open(deps, { denoPath }) {
    const { runtimeDir } = opened(deps, 'the builds', 'runtimeDir');
    const cacheDir = path.join(runtimeDir, 'builds', 'cache');
    const workDir = path.join(runtimeDir, 'builds', 'work');
    fs.rmSync(workDir, { recursive: true, force: true });
    fs.mkdirSync(workDir, { recursive: true, mode: 0o700 });
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
    const packages = path.join(cacheDir, 'npm');
    if (fs.existsSync(packages) && folderBytes(packages) > PACKAGE_CACHE_MAX_BYTES)
      fs.rmSync(packages, { recursive: true, force: true });
    return { builder: { denoPath, cacheDir, workDir, slots: new BuildSlots(os.availableParallelism()) } };
  },
  start(deps, stack) {
    const unused = new UnusedBuilds(deps);
    unused.start();
    stack.defer('forgetting unused builds', () => unused.stop());
  },
};
