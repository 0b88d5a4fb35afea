// The builds' part of a start: where this node builds (its package cache is kept between starts, the
// folders of builds a stop or a kill interrupted are removed), how many builds it runs at once (one per
// core), and its job forgetting builds and packages no site holds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { opened, type Part } from '../part.ts';
import { BuildSlots } from './build-slots.ts';
import { UnusedBuilds } from './unused-builds.ts';

export const buildsPart: Part = {
  name: 'the builds',
  open(deps, { denoPath }) {
    const { runtimeDir } = opened(deps, 'the builds', 'runtimeDir');
    const cacheDir = path.join(runtimeDir, 'builds', 'cache');
    const workDir = path.join(runtimeDir, 'builds', 'work');
    fs.rmSync(workDir, { recursive: true, force: true });
    fs.mkdirSync(workDir, { recursive: true, mode: 0o700 });
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
    return { builder: { denoPath, cacheDir, workDir, slots: new BuildSlots(os.availableParallelism()) } };
  },
  start(deps, stack) {
    const unused = new UnusedBuilds(deps);
    unused.start();
    stack.defer('forgetting unused builds', () => unused.stop());
  },
};
