// A site's function logs, live: the recent lines, then each new one as the stream brings it (newest on
// top), filtered on the server by function, level and text; paused, the view stops and on resume it
// catches up from the last line it showed.
import { get, openStream } from './api.ts';
import { badge, field, fill, h, messageOf, statusLine, time } from './dom.ts';
import type { Route } from './router.ts';
import { siteFrame } from './sites.ts';
import { serverEvents } from '../api-clients/server-events.ts';
import type { FunctionRecord, LogLine } from './types.ts';

/** Rows the view keeps; older ones leave the bottom. */
const MAX_ROWS = 500;
const RECENT = 100;
const RECONNECT_MS = 1000;
const LEVELS = ['debug', 'info', 'warn', 'error'];

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const base = `/v0/sites/${encodeURIComponent(site.id)}`;
  const { functions } = await get<{ functions: FunctionRecord[] }>(`${base}/functions`, { limit: 200 });
  const status = statusLine();
  const rows = h('tbody', { id: 'log-rows' });
  const empty = h('p', { class: 'empty' }, 'Nothing logged yet.');
  const functionSelect = h(
    'select',
    { name: 'function' },
    h('option', { value: '' }, 'All functions'),
    functions.map((f) => h('option', { value: f.path }, f.path)),
  );
  const levelSelect = h(
    'select',
    { name: 'level' },
    h('option', { value: '' }, 'All levels'),
    LEVELS.map((level) => h('option', { value: level }, level)),
  );
  const textInput = h('input', { type: 'search', name: 'q', maxlength: '200', placeholder: 'Text in the message' });
  const pauseButton = h('button', { type: 'button', 'aria-pressed': 'false' }, 'Pause');

  let last = 0;
  let paused = false;
  let stream: AbortController | undefined;

  const filter = (): Record<string, string | undefined> => ({
    function: functionSelect.value || undefined,
    level: levelSelect.value || undefined,
    q: textInput.value.trim() || undefined,
  });

  const row = (line: LogLine) =>
    h(
      'tr',
      { 'data-id': String(line.id) },
      h('td', { 'data-label': 'Time' }, time(line.createdAt)),
      h('td', { 'data-label': 'Level' }, badge(line.level.toUpperCase(), line.level)),
      h('td', { 'data-label': 'Function' }, h('span', { class: 'mono small' }, line.functionPath ?? '–')),
      h('td', { 'data-label': 'Message', class: 'log-message' }, h('pre', { class: 'log' }, line.message)),
    );

  const show = (line: LogLine) => {
    rows.prepend(row(line));
    while (rows.children.length > MAX_ROWS) rows.lastElementChild?.remove();
    empty.hidden = true;
    last = Math.max(last, line.id);
  };

  /** Follows the stream from `last` until paused, the filters change or the page is left; a drop reconnects. */
  const follow = async (controller: AbortController) => {
    while (!controller.signal.aborted && root.isConnected) {
      try {
        const query = new URLSearchParams({ since: String(last) });
        for (const [name, value] of Object.entries(filter())) if (value) query.set(name, value);
        const events = serverEvents(await openStream(`${base}/logs/stream?${query}`, controller.signal));
        status.note('Following new lines.');
        for await (const event of events) if (event.event === 'log') show(JSON.parse(event.data) as LogLine);
      } catch (err) {
        if (controller.signal.aborted) return;
        status.error(`The log stream was interrupted (${messageOf(err)}); reconnecting…`);
      }
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    }
  };

  const stop = () => {
    stream?.abort();
    stream = undefined;
  };

  const resume = () => {
    stop();
    if (paused || !root.isConnected) return;
    stream = new AbortController();
    void follow(stream);
  };

  /** The recent lines that pass the filters, then the stream after the newest of them. */
  const restart = async () => {
    stop();
    const { logs } = await get<{ logs: LogLine[] }>(`${base}/logs`, { limit: RECENT, ...filter() });
    rows.replaceChildren();
    empty.hidden = false;
    last = 0;
    for (const line of [...logs].reverse()) show(line);
    if (paused) status.note('Paused.');
    resume();
  };

  const restartShowingErrors = () => restart().catch((err) => status.error(messageOf(err)));
  functionSelect.addEventListener('change', restartShowingErrors);
  levelSelect.addEventListener('change', restartShowingErrors);
  let typing: ReturnType<typeof setTimeout> | undefined;
  textInput.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(restartShowingErrors, 300);
  });
  pauseButton.addEventListener('click', () => {
    paused = !paused;
    pauseButton.textContent = paused ? 'Resume' : 'Pause';
    pauseButton.setAttribute('aria-pressed', String(paused));
    if (paused) {
      stop();
      status.note('Paused.');
    } else resume();
  });
  window.addEventListener('hashchange', stop, { once: true });

  fill(
    body,
    h(
      'section',
      { class: 'card' },
      h('div', { class: 'section-head' }, h('h2', null, 'Logs'), pauseButton),
      h(
        'div',
        { class: 'log-filters' },
        field('Function', () => functionSelect),
        field('Level', () => levelSelect),
        field('Contains', () => textInput),
      ),
      status.el,
      empty,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          null,
          h('caption', { class: 'visually-hidden' }, 'Function logs, newest first'),
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              ['Time', 'Level', 'Function', 'Message'].map((label) => h('th', { scope: 'col' }, label)),
            ),
          ),
          rows,
        ),
      ),
    ),
  );
  await restart();
}
