// Hash routes: `#/sites/<id>/files?prefix=web/` names a page and its parameters, so a reload or a link
// (the CLI prints `#/cli-login/<code>`) opens the same page.

export interface Route {
  /** The decoded path segments, e.g. ['sites', '<id>', 'files']. */
  segments: string[];
  query: URLSearchParams;
}

export function currentRoute(): Route {
  const raw = location.hash.replace(/^#\/?/, '');
  const [pathPart = '', queryPart = ''] = raw.split('?', 2);
  const segments = pathPart
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  return { segments, query: new URLSearchParams(queryPart) };
}

/** `href('sites', id, 'files')` → `#/sites/<id>/files`, with an optional query. */
export function href(...parts: Array<string | Record<string, string>>): string {
  const query = parts.find((p): p is Record<string, string> => typeof p === 'object');
  const segments = parts.filter((p): p is string => typeof p === 'string').map(encodeURIComponent);
  const search = query ? new URLSearchParams(query).toString() : '';
  return `#/${segments.join('/')}${search ? `?${search}` : ''}`;
}

export function go(target: string): void {
  if (location.hash === target) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = target;
}
