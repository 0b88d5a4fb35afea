// `make` installs with `npm ci`, which refuses a lockfile that lacks a package it must install: the
// lockfile has to hold the Deno binary of every platform Berth runs on, at the `deno` package's version.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';

const ROOT = path.resolve(import.meta.dirname, '..');
const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version?: string; integrity?: string }>;
};
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

test('the deno package is pinned to an exact version, the one the lockfile holds', (t) => {
  const pinned = manifest.dependencies.deno!;
  t.regex(pinned, /^\d+\.\d+\.\d+$/);
  t.is(lock.packages['node_modules/deno']?.version, pinned);
});

test('the lockfile holds every platform’s Deno binary at that version, with its checksum', (t) => {
  const deno = lock.packages['node_modules/deno'] as { optionalDependencies?: Record<string, string> } | undefined;
  const platforms = Object.keys(deno?.optionalDependencies ?? {});
  t.true(platforms.length >= 6, `platforms: ${platforms.join(', ')}`);
  for (const name of [
    '@deno/linux-x64-glibc',
    '@deno/linux-arm64-glibc',
    '@deno/darwin-x64',
    '@deno/darwin-arm64',
    ...platforms,
  ]) {
    const entry = lock.packages[`node_modules/${name}`];
    t.is(entry?.version, manifest.dependencies.deno, name);
    t.regex(entry?.integrity ?? '', /^sha512-/, `${name} has a checksum`);
  }
});
