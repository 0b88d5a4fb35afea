// A site's routing rules compiled once for its files as they are (see rules-files.ts): a tree of path
// segments, so that finding the rules of a request walks the request's few segments rather than every
// rule, whether the site has none or thousands. Redirects: the first rule in the file's order that
// matches, a rule that is not forced only where no file answers. Headers: every rule that matches, in
// order, each header several rules set joined as one.
import type { HeaderRule, PathPattern, RedirectRule, RedirectStatus } from './rules-files.ts';

interface Node {
  literal: Map<string, Node>;
  placeholder: Node | null;
  /** Rules whose pattern ends here. */
  end: number[];
  /** Rules whose pattern ends in "*" here: they match here and everything below. */
  splat: number[];
}

const node = (): Node => ({ literal: new Map(), placeholder: null, end: [], splat: [] });

/** A tree of the patterns, each known by its place in the list. */
function plant(patterns: PathPattern[]): Node {
  const root = node();
  for (const [index, pattern] of patterns.entries()) {
    let at = root;
    let splat = false;
    for (const part of pattern) {
      if ('splat' in part) {
        splat = true;
        break;
      }
      if ('literal' in part) {
        const next = at.literal.get(part.literal) ?? node();
        at.literal.set(part.literal, next);
        at = next;
      } else {
        at.placeholder ??= node();
        at = at.placeholder;
      }
    }
    (splat ? at.splat : at.end).push(index);
  }
  return root;
}

/** The places of the patterns that match `segments`, in no order. */
function matching(root: Node, segments: string[]): number[] {
  const found: number[] = [];
  const walk = (at: Node, i: number) => {
    found.push(...at.splat);
    if (i === segments.length) {
      found.push(...at.end);
      return;
    }
    const segment = segments[i]!;
    const literal = at.literal.get(segment);
    if (literal) walk(literal, i + 1);
    if (at.placeholder && segment !== '') walk(at.placeholder, i + 1);
  };
  walk(root, 0);
  return found;
}

/** "/blog/" and "/blog" are one path: the request's segments without a trailing empty one. */
const matchable = (segments: string[]): string[] =>
  segments.length > 1 && segments.at(-1) === '' ? segments.slice(0, -1) : segments;

/** The values a pattern gives `segments`: its placeholders', and the splat's (the rest, "/"-joined). */
function valuesOf(pattern: PathPattern, segments: string[]): Map<string, string> {
  const values = new Map<string, string>();
  for (const [i, part] of pattern.entries()) {
    if ('splat' in part) values.set('splat', segments.slice(i).join('/'));
    else if ('placeholder' in part) values.set(part.placeholder, segments[i]!);
  }
  return values;
}

export interface RouteAnswer {
  status: RedirectStatus;
  /** For a redirect, the Location; for a rewrite (200, 404, 410), the site path to answer with. Query kept. */
  to: string;
  /** A rewrite's path and query apart, for the site to answer with its own file or function. */
  path: string;
  query: string;
}

export class RouteTable {
  readonly #redirects: RedirectRule[];
  readonly #headers: HeaderRule[];
  readonly #redirectTree: Node;
  readonly #headerTree: Node;

  constructor(redirects: RedirectRule[], headers: HeaderRule[]) {
    this.#redirects = redirects;
    this.#headers = headers;
    this.#redirectTree = plant(redirects.map((rule) => rule.from));
    this.#headerTree = plant(headers.map((rule) => rule.path));
  }

  get empty(): boolean {
    return this.#redirects.length === 0 && this.#headers.length === 0;
  }

  /**
   * The rules that may answer a request for `segments` (decoded, as the path has them), first first:
   * the caller applies the first that is forced or finds no file (`answer`).
   */
  redirectsFor(segments: string[]): number[] {
    if (this.#redirects.length === 0) return [];
    return matching(this.#redirectTree, matchable(segments)).sort((a, b) => a - b);
  }

  forced(rule: number): boolean {
    return this.#redirects[rule]!.force;
  }

  /** What rule `rule` answers a request for `segments` with `query` ("" or "?…"). */
  answer(rule: number, segments: string[], query: string): RouteAnswer {
    const { from, to, status } = this.#redirects[rule]!;
    const values = valuesOf(from, matchable(segments));
    const external = /^https?:\/\//i.test(to);
    const target = to.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, (whole, name: string) => {
      const value = values.get(name);
      if (value === undefined) return whole;
      // A value goes into the destination as a path would carry it: each segment encoded.
      return value
        .split('/')
        .map((segment) => encodeURIComponent(segment))
        .join('/');
    });
    const at = target.indexOf('?');
    const path = at === -1 ? target : target.slice(0, at);
    const own = at === -1 ? '' : target.slice(at + 1);
    const given = query.startsWith('?') ? query.slice(1) : query;
    const joined = [own, given].filter(Boolean).join('&');
    const kept = joined ? `?${joined}` : '';
    return { status, to: `${path}${kept}`, path: external ? '' : path, query: kept };
  }

  /** The headers of every rule that matches `segments`, merged in the file's order; none when none do. */
  headersFor(segments: string[]): Array<[string, string]> {
    if (this.#headers.length === 0) return [];
    const rules = matching(this.#headerTree, matchable(segments)).sort((a, b) => a - b);
    if (rules.length === 0) return [];
    const merged = new Map<string, [string, string]>();
    for (const index of rules) {
      const rule = this.#headers[index]!;
      for (const name of rule.detach) merged.delete(name);
      for (const [name, value] of rule.set) {
        const key = name.toLowerCase();
        const before = merged.get(key);
        merged.set(key, before ? [before[0], `${before[1]}, ${value}`] : [name, value]);
      }
    }
    return [...merged.values()];
  }
}
