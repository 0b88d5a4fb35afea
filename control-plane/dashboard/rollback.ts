// "Roll back to this": promote an earlier deployment, after a confirmation that names what would
// change. The site's files now and right after that deployment are both read from its history (the
// snapshot API), so the question says which paths change, go and come back.
import { api, get } from './api.ts';
import type { Deployment, Pagination, SnapshotFile } from './types.ts';

/** An instant after every change: the site's files as they are now. */
const NOW = '9999-12-31T23:59:59Z';
/** Beyond this many files a side, the question gives no list rather than keep the user waiting. */
const MAX_COMPARED = 5000;
/** Paths named in the question per kind of change; the rest are counted. */
const NAMED = 5;

type Files = Map<string, SnapshotFile>;

export interface Changes {
  changed: string[];
  removed: string[];
  back: string[];
}

/** The site's files at `at`, or null when there are too many to compare. */
async function filesAt(siteId: string, at: string): Promise<Files | null> {
  const files: Files = new Map();
  let offset: number | null = 0;
  while (offset !== null) {
    if (files.size >= MAX_COMPARED) return null;
    const page: { files: SnapshotFile[]; pagination: Pagination } = await get(
      `/v0/sites/${encodeURIComponent(siteId)}/snapshot`,
      { at, limit: 200, offset },
    );
    for (const file of page.files) files.set(file.path, file);
    offset = page.pagination.nextOffset;
  }
  return files;
}

/** What going from `now` to `then` does at each path. */
export function changesOf(now: Files, then: Files): Changes {
  const changes: Changes = { changed: [], removed: [], back: [] };
  for (const [path, file] of now) {
    const was = then.get(path);
    if (!was) changes.removed.push(path);
    else if (was.sha256 !== file.sha256 || was.contentType !== file.contentType) changes.changed.push(path);
  }
  for (const path of then.keys()) if (!now.has(path)) changes.back.push(path);
  return changes;
}

const phrase = (paths: string[], one: string, many: string): string | null => {
  if (paths.length === 0) return null;
  if (paths.length === 1) return `${paths[0]} ${one}`;
  const named = paths.slice(0, NAMED).join(', ');
  const rest = paths.length > NAMED ? `, and ${paths.length - NAMED} more` : '';
  return `${paths.length} files ${many} (${named}${rest})`;
};

const shorten = (text: string, max = 100): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** The confirmation's text: which deployment, when it was published, and what changes. */
export function rollbackQuestion(d: Deployment, changes: Changes | null): string {
  const name = d.message ? `${d.shortId} (“${shorten(d.message)}”)` : d.shortId;
  const when = d.publishedAt ? ` on ${new Date(d.publishedAt).toLocaleString()}` : '';
  let what = 'the site has too many files to list what changes';
  if (changes) {
    const parts = [
      phrase(changes.changed, 'changes', 'change'),
      phrase(changes.removed, 'is removed', 'are removed'),
      phrase(changes.back, 'comes back', 'come back'),
    ].filter((p) => p !== null);
    what = parts.length > 0 ? parts.join('; ') : 'its files are the same as now, so nothing changes';
  }
  return `Roll back to ${name}? The site becomes what it was right after it was published${when}: ${what}. The rollback is recorded as a new deployment.`;
}

/** Asks, then promotes `d`; the new PROMOTE deployment, or null when the user said no. */
export async function rollBack(siteId: string, d: Deployment): Promise<Deployment | null> {
  if (!canRollBackTo(d) || !d.publishedAt) throw new Error(`deployment ${d.shortId} cannot be rolled back to`);
  const [now, then] = await Promise.all([filesAt(siteId, NOW), filesAt(siteId, d.publishedAt)]);
  if (!window.confirm(rollbackQuestion(d, now && then ? changesOf(now, then) : null))) return null;
  const { deployment } = await api<{ deployment: Deployment }>(
    'POST',
    `/v0/sites/${encodeURIComponent(siteId)}/deployments/${encodeURIComponent(d.id)}/promote`,
  );
  return deployment;
}

/** Only a published deployment the site is not at now can be rolled back to. */
export const canRollBackTo = (d: Deployment): boolean => d.status === 'PUBLISHED' && !d.current;
