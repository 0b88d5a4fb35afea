import { parseArgs } from 'node:util';

/** A mistake in the command line: reported with the usage text and exit code 2. */
export class UsageError extends Error {}

/** The `--to` of a copy command (`copy-metadata`, `copy-blobs`), trimmed; '' when it is not given. */
export function copyTarget(args: string[]): string {
  try {
    const { values } = parseArgs({
      args,
      options: { to: { type: 'string' }, json: { type: 'boolean' } },
      strict: true,
    });
    return (values.to ?? '').trim();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}
