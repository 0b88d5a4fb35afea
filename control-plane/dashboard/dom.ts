// Building the page: elements from tag, attributes and children, with text always set as text. Every
// string a tenant can choose (file, site and secret names, query results) is hostile, so nothing here
// ever parses HTML.

export type Child = Node | string | number | null | undefined | false | Child[];
type Listener = (event: Event) => void;
export type Attrs = Record<string, string | number | boolean | null | undefined | Listener>;

function append(parent: Node, child: Child): void {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) append(parent, c);
    return;
  }
  parent.appendChild(
    typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child,
  );
}

/** `h('button', { type: 'button', onclick: … }, 'Save')`. `on*` functions become listeners. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') {
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === 'value' && 'value' in el) {
      (el as HTMLInputElement).value = String(value);
    } else if (name === 'checked' && 'checked' in el) {
      (el as HTMLInputElement).checked = Boolean(value);
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Replaces everything inside `el`. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

let ids = 0;
/** A unique id for a label's `for`. */
export const uid = (prefix = 'f'): string => `${prefix}-${++ids}`;

/** A labelled input (or select/textarea made by `control(id)`). */
export function field(label: string, control: (id: string) => HTMLElement, hint?: string): HTMLElement {
  const id = uid();
  const el = control(id);
  el.id = id;
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    el,
    hint ? h('small', { class: 'hint' }, hint) : null,
  );
}

/** A status line for a section: errors in red with role=alert, notes in grey. */
export function statusLine(): {
  el: HTMLElement;
  error(message: string): void;
  note(message: string): void;
  clear(): void;
} {
  const el = h('p', { class: 'status', 'aria-live': 'polite' });
  return {
    el,
    error(message) {
      el.className = 'status error';
      el.setAttribute('role', 'alert');
      el.textContent = message;
    },
    note(message) {
      el.className = 'status note';
      el.removeAttribute('role');
      el.textContent = message;
    },
    clear() {
      el.className = 'status';
      el.removeAttribute('role');
      el.textContent = '';
    },
  };
}

/** The message of anything thrown, for the user. */
export const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * A button that runs `action` once at a time: disabled while it runs, its failure shown in `status`
 * (or in an alert line after the button).
 */
export function actionButton(
  label: string,
  action: () => Promise<unknown>,
  options: {
    status?: ReturnType<typeof statusLine>;
    class?: string;
    type?: 'button' | 'submit';
    ariaLabel?: string;
  } = {},
): HTMLButtonElement {
  const button = h('button', { type: options.type ?? 'button', class: options.class, 'aria-label': options.ariaLabel });
  button.textContent = label;
  button.addEventListener('click', async (event) => {
    if (options.type === 'submit') return;
    event.preventDefault();
    await run(button, action, options.status);
  });
  return button;
}

/** Runs `action` with `button` disabled, reporting failure to `status` or with a native alert. */
export async function run(
  button: HTMLButtonElement | null,
  action: () => Promise<unknown>,
  status?: ReturnType<typeof statusLine>,
): Promise<void> {
  if (button?.disabled) return;
  if (button) button.disabled = true;
  status?.clear();
  try {
    await action();
  } catch (err) {
    if (status) status.error(messageOf(err));
    else window.alert(messageOf(err));
  } finally {
    if (button) button.disabled = false;
  }
}

/** A form whose submit runs `action` (the submit button disabled meanwhile). */
export function form(
  attrs: Attrs,
  action: (form: HTMLFormElement) => Promise<unknown>,
  status: ReturnType<typeof statusLine>,
  ...children: Child[]
): HTMLFormElement {
  const el = h('form', attrs, ...children);
  el.addEventListener('submit', async (event) => {
    event.preventDefault();
    const submit = el.querySelector<HTMLButtonElement>('button[type=submit]');
    await run(submit, () => action(el), status);
  });
  return el;
}

export interface Column<T> {
  label: string;
  cell: (row: T) => Child;
  class?: string;
}

/** A table that scrolls sideways inside its own box on narrow screens, never the page. */
export function table<T>(caption: string, columns: Column<T>[], rows: T[], empty = 'Nothing here yet.'): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      null,
      h('caption', { class: 'visually-hidden' }, caption),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)),
        ),
      ),
      h(
        'tbody',
        null,
        rows.map((row) =>
          h(
            'tr',
            null,
            columns.map((c) => h('td', { class: c.class, 'data-label': c.label }, c.cell(row))),
          ),
        ),
      ),
    ),
  );
}

/** A read-only text box with a Copy button, for a value shown once. */
export function copyField(label: string, value: string): HTMLElement {
  const id = uid('copy');
  const input = h('input', {
    id,
    type: 'text',
    readonly: true,
    value,
    class: 'mono',
    spellcheck: 'false',
    autocomplete: 'off',
  });
  const done = h('span', { class: 'hint', 'aria-live': 'polite' });
  const copy = h('button', { type: 'button' }, 'Copy');
  copy.addEventListener('click', async () => {
    await copyText(value, () => input.select());
    done.textContent = 'Copied.';
  });
  return h(
    'div',
    { class: 'field copy' },
    h('label', { for: id }, label),
    h('div', { class: 'row' }, input, copy),
    done,
  );
}

/** Puts `value` on the clipboard; where the page may not (not a secure context, permission refused), `select` selects it and the browser copies the selection. */
async function copyText(value: string, select: () => void): Promise<void> {
  try {
    await navigator.clipboard.writeText(value);
  } catch {
    select();
    document.execCommand('copy');
  }
}

/** A value shown as code with a Copy button beside it, for values to paste elsewhere (DNS records). */
export function copyValue(value: string, ariaLabel: string): HTMLElement {
  const code = h('code', { class: 'mono' }, value);
  const done = h('span', { class: 'hint', 'aria-live': 'polite' });
  const copy = h('button', { type: 'button', class: 'small-button', 'aria-label': ariaLabel }, 'Copy');
  copy.addEventListener('click', async () => {
    await copyText(value, () => window.getSelection()?.selectAllChildren(code));
    done.textContent = 'Copied.';
  });
  return h('div', { class: 'copy-value' }, code, copy, done);
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return '–';
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** A timestamp in the reader's locale, the exact one in a tooltip. */
export function time(iso: string | null | undefined): Child {
  if (!iso) return '–';
  const date = new Date(iso.includes('T') ? iso : `${iso.replace(' ', 'T')}Z`);
  if (Number.isNaN(date.getTime())) return iso;
  return h('time', { datetime: date.toISOString(), title: date.toISOString() }, date.toLocaleString());
}

export const badge = (text: string, kind = text.toLowerCase()): HTMLElement =>
  h('span', { class: `badge badge-${kind}` }, text);
