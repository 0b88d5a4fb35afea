// Moments as a command line takes them: an RFC 3339 time, or how long ago (`90s`, `10m`, `2h`, `3d`).
import { UsageError } from './usage-error.ts';

const AGO = /^(\d+)([smhd])$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: 24 * 3600_000 };

/** The moment `text` names, as an RFC 3339 time; `flag` names the option in the error. */
export function momentOf(text: string, flag: string, now = Date.now()): string {
  const ago = AGO.exec(text.trim());
  if (ago) return new Date(now - Number(ago[1]) * UNIT_MS[ago[2]!]!).toISOString();
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text) || Number.isNaN(Date.parse(text)))
    throw new UsageError(
      `${flag} takes an RFC 3339 time (2026-11-26T09:30:00Z) or how long ago (10m, 2h, 3d), not "${text}"`,
    );
  return new Date(text).toISOString();
}
