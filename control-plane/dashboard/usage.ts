// The account's usage: model calls today (UTC) against the daily allowance.
import { get } from './api.ts';
import { fill, h } from './dom.ts';

export async function render(root: HTMLElement): Promise<void> {
  fill(root, h('h1', null, 'Usage'), h('p', { class: 'loading' }, 'Loading…'));
  const { usage } = await get<{ usage: { day: string; modelCalls: number; allowance: number } }>('/v0/accounts/current/usage');
  const share = usage.allowance > 0 ? Math.min(1, usage.modelCalls / usage.allowance) : 0;
  fill(
    root,
    h('h1', null, 'Usage'),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Model calls today'),
      h('p', { class: 'big-number' }, `${usage.modelCalls.toLocaleString()} of ${usage.allowance.toLocaleString()}`),
      h('meter', { min: 0, max: Math.max(usage.allowance, 1), value: usage.modelCalls, high: usage.allowance * 0.8, optimum: 0, 'aria-label': 'Model calls today against the allowance' }),
      h('p', { class: 'hint' }, `UTC day ${usage.day}: calls of ctx.llm by every function of this account, failed ones included (${Math.round(share * 100)}% of the allowance). The count starts again at midnight UTC.`),
    ),
  );
}
