// Finds the Deno executable. The platform package's binary is spawned directly: the `deno` package's
// .bin wrapper is a Node script that costs about 100 ms per spawn.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const PLATFORM_PACKAGES: Record<string, string> = {
  'linux-x64': '@deno/linux-x64-glibc',
  'linux-arm64': '@deno/linux-arm64-glibc',
  'darwin-x64': '@deno/darwin-x64',
  'darwin-arm64': '@deno/darwin-arm64',
};

export function resolveDenoBinary(override?: string): string {
  if (override) return override;
  const require = createRequire(import.meta.url);
  const pkg = PLATFORM_PACKAGES[`${process.platform}-${process.arch}`];
  if (pkg) {
    try {
      return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'deno');
    } catch {
      // Fall through to the binary the deno package placed beside itself.
    }
  }
  const bundled = path.join(path.dirname(require.resolve('deno/package.json')), 'deno');
  if (fs.existsSync(bundled)) return bundled;
  throw new Error('no Deno binary found: run `npm install`, or set BERTH_DENO to a deno executable');
}
