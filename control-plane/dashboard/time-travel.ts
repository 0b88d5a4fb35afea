// A site database's time travel: the range of moments its replica holds, and for ADMINs a restore to a
// second in it. The restore waits for the site's subdomain, typed; once done, Undo restores to the
// moment just before it. The time is picked in the reader's time zone and sent in UTC.
import { ApiError, api, get, isAdmin } from './api.ts';
import { type Child, actionButton, field, fill, form, formatBytes, h, messageOf, statusLine, time } from './dom.ts';
import { localTime, localToUtc, utcToLocal } from './restore.ts';
import type { DatabaseRestore, RestorePoints, SiteDetail } from './types.ts';

/** The quick choices under the time: how long ago each one is. */
const QUICK: Array<[string, number]> = [
  ['5 minutes ago', 5 * 60_000],
  ['1 hour ago', 3600_000],
  ['1 day ago', 24 * 3600_000],
];

const rangeText = (points: RestorePoints): Child[] => [
  ...(points.earliest && points.latest
    ? ['Restorable to any second from ', time(points.earliest), ' to ', time(points.latest), '.']
    : ['Nothing replicated yet: the first writes reach the replica within about a second.']),
  ...(points.replication ? [' ', replicationText(points.replication)] : []),
];

/** The replica's state in words: how far behind it is, when it last received writes, what it takes. */
const replicationText = (r: NonNullable<RestorePoints['replication']>): string =>
  `Replica: ${r.lagMs > 0 ? `${(r.lagMs / 1000).toFixed(1)} s behind` : 'up to date'}${r.replicatedAt ? `, last received writes at ${localTime(r.replicatedAt)}` : ''}, ${formatBytes(r.replicaBytes)}.`;

/** A 422 names the range the replica does hold, in the reader's time too. */
function outOfRange(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.code !== 'restore_point_unavailable') return err;
  const { earliest, latest } = err.details ?? {};
  if (typeof earliest !== 'string' || typeof latest !== 'string') return err;
  return new Error(`${err.message}. In your time: from ${localTime(earliest)} to ${localTime(latest)}.`);
}

export async function timeTravelSection(site: SiteDetail, dbPath: string): Promise<HTMLElement> {
  const status = statusLine();
  const rangeEl = h('p', { 'aria-live': 'polite' });
  const confirmEl = h('div');
  const doneEl = h('div', { 'aria-live': 'polite' });
  const input = h('input', { type: 'datetime-local', name: 'at', step: 1, required: true });
  const utcEl = h('small', { class: 'hint mono', 'aria-live': 'polite' });

  const load = async () => {
    const points = await get<RestorePoints>(`${dbPath}/restore-points`);
    fill(rangeEl, rangeText(points));
    if (points.earliest && points.latest) {
      input.min = utcToLocal(points.earliest);
      input.max = utcToLocal(points.latest);
    } else {
      // A database in its first seconds has no range yet: it comes by itself while the page shows it.
      // A look that fails says why and looks again.
      const again = () => {
        if (rangeEl.isConnected)
          load().catch((err: unknown) => {
            status.error(`The restore range could not be read: ${messageOf(err)}`);
            setTimeout(again, 2000);
          });
      };
      setTimeout(again, 2000);
    }
  };

  const restore = async (at: string): Promise<DatabaseRestore> => {
    try {
      return await api<DatabaseRestore>('POST', `${dbPath}/restore`, { at });
    } catch (err) {
      throw outOfRange(err);
    }
  };

  // A confirmation asked for another time is not what it would restore: it goes when the time changes.
  input.addEventListener('input', () => {
    fill(confirmEl);
    status.clear();
    try {
      utcEl.textContent = `= ${localToUtc(input.value)} (UTC)`;
    } catch {
      utcEl.textContent = '';
    }
  });

  const confirmStep = (at: string): Child[] => [
    h(
      'p',
      null,
      'Put the database of ',
      h('strong', null, site.name),
      ' back as it was at ',
      time(at),
      '? Writes made since then go, until Undo brings them back. To go on, type the site’s subdomain, ',
      h('strong', { class: 'mono' }, site.subdomain),
      ':',
    ),
    form(
      { class: 'stack', 'aria-label': 'Confirm the restore' },
      async (el) => {
        if (String(new FormData(el).get('subdomain') ?? '').trim() !== site.subdomain)
          throw new Error(`type ${site.subdomain} to confirm the restore`);
        const done = await restore(at);
        fill(confirmEl);
        fill(
          doneEl,
          h('p', null, 'Restored to ', time(done.restoredTo), '.'),
          actionButton(
            'Undo',
            async () => {
              const undone = await restore(done.restoredFrom);
              fill(doneEl, h('p', null, 'Undone: the database is back as it was at ', time(undone.restoredTo), '.'));
              await load();
            },
            { status, ariaLabel: 'Undo the restore' },
          ),
        );
        await load();
      },
      status,
      field('Type the subdomain', () =>
        h('input', { name: 'subdomain', required: true, autocomplete: 'off', spellcheck: 'false', class: 'mono' }),
      ),
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit', class: 'danger' }, 'Restore the database'),
        actionButton('Cancel', async () => fill(confirmEl)),
      ),
    ),
  ];

  const picker = isAdmin()
    ? [
        form(
          { class: 'row-form restore-form', 'aria-label': 'Restore the database to a time' },
          async () => {
            fill(doneEl);
            fill(confirmEl, confirmStep(localToUtc(input.value)));
          },
          status,
          field(
            'Time',
            () => input,
            `Your local time (${Intl.DateTimeFormat().resolvedOptions().timeZone}), to the second.`,
          ),
          h('button', { type: 'submit' }, 'Restore…'),
        ),
        utcEl,
        h(
          'div',
          { class: 'actions', role: 'group', 'aria-label': 'Quick choices' },
          QUICK.map(([label, ago]) =>
            h(
              'button',
              {
                type: 'button',
                onclick: () => {
                  input.value = utcToLocal(new Date(Math.floor((Date.now() - ago) / 1000) * 1000).toISOString());
                  input.dispatchEvent(new Event('input'));
                },
              },
              label,
            ),
          ),
        ),
        confirmEl,
        doneEl,
      ]
    : h('p', { class: 'hint' }, 'The account’s ADMINs can restore it.');

  await load();
  return h(
    'section',
    { class: 'card' },
    h(
      'div',
      { class: 'section-head' },
      h('h2', null, 'Time travel'),
      actionButton('Refresh', load, { status, ariaLabel: 'Refresh the restorable range' }),
    ),
    h(
      'p',
      { class: 'hint' },
      'Every write reaches the database’s replica within about a second; a restore puts the rows and the migrations back as they were at a second.',
    ),
    rangeEl,
    picker,
    status.el,
  );
}
