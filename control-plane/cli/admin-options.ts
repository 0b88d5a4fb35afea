// The options of `berth admin` commands: flags only (plus --json), parsed strictly, a problem a usage error.
import { parseArgs } from 'node:util';
import { Uuid } from '../schemas.ts';
import { UsageError } from './usage-error.ts';

export function options(
  args: string[],
  spec: Record<string, { type: 'string' | 'boolean' }>,
): Record<string, string | boolean | undefined> {
  try {
    return parseArgs({ args, options: { ...spec, json: { type: 'boolean' } }, strict: true, allowPositionals: false })
      .values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export function required(value: unknown, flag: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`${flag} is required`);
  return value.trim();
}

export function uuid(value: unknown, flag: string): string {
  const text = required(value, flag);
  if (!Uuid.safeParse(text).success) throw new UsageError(`${flag} must be a UUID`);
  return text;
}
