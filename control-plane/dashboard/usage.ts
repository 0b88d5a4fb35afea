// The account's usage: model calls today (UTC) against the daily allowance, the bytes its files hold
// against its storage limit, and the bytes its site databases' replicas take.
import { get } from './api.ts';
import { fill, formatBytes, h } from './dom.ts';
import type { AccountUsage } from './types.ts';

export async function render(root: HTMLElement): Promise<void> {
  fill(root, h('h1', null, 'Usage'), h('p', { class: 'loading' }, 'Loading…'));
  const { usage } = await get<{ usage: AccountUsage }>('/v0/accounts/current/usage');
  const { usedBytes, limitBytes } = usage.storage;
  const share = usage.allowance > 0 ? Math.min(1, usage.modelCalls / usage.allowance) : 0;
  fill(
    root,
    h('h1', null, 'Usage'),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Model calls today'),
      h('p', { class: 'big-number' }, `${usage.modelCalls.toLocaleString()} of ${usage.allowance.toLocaleString()}`),
      h('meter', {
        min: 0,
        max: Math.max(usage.allowance, 1),
        value: usage.modelCalls,
        high: usage.allowance * 0.8,
        optimum: 0,
        'aria-label': 'Model calls today against the allowance',
      }),
      h(
        'p',
        { class: 'hint' },
        `UTC day ${usage.day}: calls of ctx.llm by every function of this account, failed ones included (${Math.round(share * 100)}% of the allowance). The count starts again at midnight UTC.`,
      ),
    ),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Storage'),
      h(
        'p',
        { class: 'big-number' },
        limitBytes === null ? formatBytes(usedBytes) : `${formatBytes(usedBytes)} of ${formatBytes(limitBytes)}`,
      ),
      limitBytes === null
        ? null
        : h('meter', {
            min: 0,
            max: Math.max(limitBytes, 1),
            value: usedBytes,
            high: limitBytes * 0.8,
            optimum: 0,
            'aria-label': 'Stored bytes against the storage limit',
          }),
      h(
        'p',
        { class: 'hint' },
        `Every version of every file of this account’s buckets, ctx.data writes included, each distinct content counted once. ${limitBytes === null ? 'This account has no storage limit.' : 'Writes past the limit are refused.'} Deleting a file keeps its versions: delete old versions to free space (a file’s history in Files, or “berth files prune <fileId>”).`,
      ),
      h(
        'p',
        { class: 'hint' },
        `Site database replicas (their history, for restores): ${formatBytes(usage.storage.databaseReplicaBytes)}, as last measured. Each is bounded on its own, its oldest history dropped first, outside the limit.`,
      ),
      h(
        'p',
        { class: 'hint' },
        `Previews’ branches of site databases: ${formatBytes(usage.storage.databaseBranchBytes)}, as last measured. A branch is made only while your files and branches leave room for it; each ends with its preview.`,
      ),
    ),
  );
}
