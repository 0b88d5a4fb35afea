// A site's routing rules as it writes them, in the format Netlify and Cloudflare Pages share: `web/_redirects`
// (one rule a line: `from to [status][!]`) and `web/_headers` (a path, then its headers indented below it).
// Each problem is reported at its line and column, so a deployment or a file write that carries a broken
// file fails with `web/_redirects:<line>:<column>: <message>` and nothing changes. What Netlify offers and
// Berth does not (a rule by country, language or role, one matching a query parameter, a rule of another
// host) is refused by name rather than ignored.

/** The most bytes a rules file may hold. */
export const MAX_RULES_FILE_BYTES = 100 * 1024;
export const MAX_REDIRECT_RULES = 2000;
export const MAX_HEADER_RULES = 1000;
/** The most characters one line may hold. */
const MAX_LINE = 1000;

export const REDIRECTS_FILE = 'web/_redirects';
export const HEADERS_FILE = 'web/_headers';

/** The site's rules files are read as rules, never served as files. */
export const isRulesFile = (path: string): boolean => path === REDIRECTS_FILE || path === HEADERS_FILE;

/** What is wrong with the bytes a rules file at `path` would hold (none for another path). */
export function rulesProblems(path: string, bytes: Buffer): RulesProblem[] {
  if (path === REDIRECTS_FILE) return parseRedirects(bytes.toString('utf8'), bytes.length).problems;
  if (path === HEADERS_FILE) return parseHeaders(bytes.toString('utf8'), bytes.length).problems;
  return [];
}

export interface RulesProblem {
  line: number;
  column: number;
  message: string;
}

/** Where a rule's path puts a placeholder or the splat: a path as its segments. */
export type PathPattern = Array<{ literal: string } | { placeholder: string } | { splat: true }>;

export type RedirectStatus = 200 | 301 | 302 | 303 | 307 | 308 | 404 | 410;
const STATUSES: ReadonlySet<number> = new Set([200, 301, 302, 303, 307, 308, 404, 410]);

export interface RedirectRule {
  from: PathPattern;
  /** The destination as written: a path of the site, or for a redirect an http(s) URL too. */
  to: string;
  status: RedirectStatus;
  /** Applies even where a file answers the path (`!`). */
  force: boolean;
}

export interface HeaderRule {
  path: PathPattern;
  /** Headers set, in their order: `[name, value]`. */
  set: Array<[string, string]>;
  /** Headers that rules before this one set, taken off again (`! Name`). */
  detach: string[];
}

/**
 * Headers a rule may not set: those Berth writes itself for every answer (its length, ranges and
 * validators, its request id) and those of the connection, and cookies, which a file's answer never sets.
 */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  'accept-ranges',
  'connection',
  'content-encoding',
  'content-length',
  'content-range',
  'etag',
  'keep-alive',
  'last-modified',
  'proxy-connection',
  'set-cookie',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const PLACEHOLDER = /^:([A-Za-z_][A-Za-z0-9_]*)$/;
const PLACEHOLDER_IN_TEXT = /:([A-Za-z_][A-Za-z0-9_]*)/g;

interface Token {
  text: string;
  column: number;
}

/** The whitespace-separated words of a line, each with its column (1-based). */
function tokens(line: string): Token[] {
  return [...line.matchAll(/\S+/g)].map((m) => ({ text: m[0], column: m.index + 1 }));
}

/** Splits a text into its lines (numbered from 1), refusing a file past the size bound at once. */
function lines(text: string, bytes: number, file: string): { lines: string[]; problem: RulesProblem | null } {
  if (bytes > MAX_RULES_FILE_BYTES)
    return {
      lines: [],
      problem: {
        line: 1,
        column: 1,
        message: `${file} is ${bytes} bytes, more than the ${MAX_RULES_FILE_BYTES} it may be`,
      },
    };
  return { lines: text.split(/\r?\n/), problem: null };
}

/** A rule's path as a pattern, or why it is not one. */
function pathPattern(token: Token): PathPattern | RulesProblem {
  const at = (message: string, offset = 0): RulesProblem => ({ line: 0, column: token.column + offset, message });
  const path = token.text;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path))
    return at(
      `${path}: a rule matches paths of this site's hosts, so it starts with "/"; rules of other hosts are not supported`,
    );
  if (!path.startsWith('/')) return at(`${path}: a rule's path starts with "/"`);
  if (path.includes('?') || path.includes('#')) return at(`${path}: a rule's path has no query string or fragment`);
  const segments = path.slice(1).split('/');
  // "/blog/" and "/blog" are one path.
  if (segments.length > 1 && segments.at(-1) === '') segments.pop();
  const pattern: PathPattern = [];
  let offset = 1;
  const names = new Set<string>();
  for (const [i, segment] of segments.entries()) {
    if (segment === '*') {
      if (i !== segments.length - 1) return at(`${path}: "*" may only end a path`, offset);
      pattern.push({ splat: true });
    } else if (segment.startsWith(':')) {
      const name = PLACEHOLDER.exec(segment)?.[1];
      if (!name)
        return at(
          `${path}: "${segment}" is no placeholder: a placeholder is ":" and a name of letters, digits and "_"`,
          offset,
        );
      if (name === 'splat') return at(`${path}: ":splat" is what "*" matched, not a placeholder of its own`, offset);
      if (names.has(name)) return at(`${path}: ":${name}" is named twice`, offset);
      names.add(name);
      pattern.push({ placeholder: name });
    } else if (segment.includes('*')) {
      return at(`${path}: "*" matches whole segments only, at the end of a path`, offset + segment.indexOf('*'));
    } else {
      try {
        pattern.push({ literal: decodeURIComponent(segment) });
      } catch {
        return at(`${path}: "${segment}" is not a valid percent-encoded segment`, offset);
      }
    }
    offset += segment.length + 1;
  }
  return pattern;
}

const isProblem = (value: unknown): value is RulesProblem =>
  typeof value === 'object' && value !== null && 'message' in value && 'column' in value;

/** The names a pattern gives values to: its placeholders, and `splat` where it ends in "*". */
const namesOf = (pattern: PathPattern): Set<string> =>
  new Set(pattern.flatMap((part) => ('placeholder' in part ? [part.placeholder] : 'splat' in part ? ['splat'] : [])));

/** `web/_redirects`: its rules in order, or every problem it has. */
export function parseRedirects(
  text: string,
  bytes = Buffer.byteLength(text),
): { rules: RedirectRule[]; problems: RulesProblem[] } {
  const split = lines(text, bytes, REDIRECTS_FILE);
  if (split.problem) return { rules: [], problems: [split.problem] };
  const rules: RedirectRule[] = [];
  const problems: RulesProblem[] = [];
  for (const [index, raw] of split.lines.entries()) {
    const line = index + 1;
    const words = tokens(raw);
    if (words.length === 0 || words[0]!.text.startsWith('#')) continue;
    const problem = (column: number, message: string) => problems.push({ line, column, message });
    if (raw.length > MAX_LINE) {
      problem(MAX_LINE + 1, `a rule may be ${MAX_LINE} characters long`);
      continue;
    }
    if (rules.length === MAX_REDIRECT_RULES) {
      problem(1, `more than ${MAX_REDIRECT_RULES} rules: a site may have ${MAX_REDIRECT_RULES}`);
      break;
    }
    const [fromWord, ...rest] = words;
    // Netlify's rules by query parameter name them between the path and the destination.
    const query = rest[0] && !rest[0].text.startsWith('/') && /^[^=/:]+=/.test(rest[0].text) ? rest[0] : null;
    if (query) {
      problem(
        query.column,
        `${query.text}: rules matching a query parameter are not supported; the query string is passed on to the destination`,
      );
      continue;
    }
    const toWord = rest[0];
    if (!toWord) {
      problem(fromWord!.column + fromWord!.text.length, 'a rule names a destination after its path');
      continue;
    }
    const from = pathPattern(fromWord!);
    if (isProblem(from)) {
      problem(from.column, from.message);
      continue;
    }
    let status: RedirectStatus = 301;
    let force = false;
    const statusWord = rest[1];
    if (statusWord) {
      const parsed = /^(\d{3})(!?)$/.exec(statusWord.text);
      if (!parsed) {
        problem(
          statusWord.column,
          `${statusWord.text}: a rule's third word is its status (301, 302, 303, 307, 308, 200, 404 or 410), with "!" to apply it where a file answers too`,
        );
        continue;
      }
      if (!STATUSES.has(Number(parsed[1]))) {
        problem(
          statusWord.column,
          `${parsed[1]}: a rule's status is 301, 302, 303, 307 or 308 (a redirect), 200 (a rewrite), 404 or 410`,
        );
        continue;
      }
      status = Number(parsed[1]) as RedirectStatus;
      force = parsed[2] === '!';
    }
    const condition = rest[2];
    if (condition) {
      problem(condition.column, `${condition.text}: rules by country, language or role are not supported`);
      continue;
    }
    const to = toWord.text;
    if (/[^\x21-\x7e]/.test(to)) {
      problem(
        toWord.column,
        `${to}: a destination is written as a URL carries it, each other character percent-encoded (%C3%BC for ü)`,
      );
      continue;
    }
    const external = /^https?:\/\//i.test(to);
    if (!external && !to.startsWith('/')) {
      problem(toWord.column, `${to}: a destination is a path of the site ("/…") or, for a redirect, an http(s) URL`);
      continue;
    }
    if (external && (status === 200 || status === 404 || status === 410)) {
      problem(
        toWord.column,
        `${to}: a rewrite answers with a path of this site, never with another host: redirect to it instead (301, 302, 303, 307 or 308)`,
      );
      continue;
    }
    if (!external && to.startsWith('//')) {
      problem(toWord.column, `${to}: "//" would name another host; a destination path starts with one "/"`);
      continue;
    }
    const names = namesOf(from);
    const unknown = [...to.matchAll(PLACEHOLDER_IN_TEXT)].find((m) => !names.has(m[1]!));
    if (unknown) {
      problem(
        toWord.column + unknown.index,
        `${unknown[0]} is not a placeholder of this rule's path${unknown[1] === 'splat' ? ' (it has no "*")' : ''}`,
      );
      continue;
    }
    rules.push({ from, to, status, force });
  }
  return { rules, problems };
}

/** `web/_headers`: its rules in order, or every problem it has. */
export function parseHeaders(
  text: string,
  bytes = Buffer.byteLength(text),
): { rules: HeaderRule[]; problems: RulesProblem[] } {
  const split = lines(text, bytes, HEADERS_FILE);
  if (split.problem) return { rules: [], problems: [split.problem] };
  const rules: HeaderRule[] = [];
  const problems: RulesProblem[] = [];
  let current: HeaderRule | null = null;
  /** The path above failed: its headers are not reported again. */
  let skipping = false;
  for (const [index, raw] of split.lines.entries()) {
    const line = index + 1;
    const problem = (column: number, message: string) => problems.push({ line, column, message });
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    if (raw.length > MAX_LINE) {
      problem(MAX_LINE + 1, `a line may be ${MAX_LINE} characters long`);
      continue;
    }
    const indent = raw.length - raw.trimStart().length;
    if (indent === 0) {
      // A path: the headers on the indented lines below it are for the paths it matches.
      if (rules.length === MAX_HEADER_RULES) {
        problem(1, `more than ${MAX_HEADER_RULES} rules: a site may have ${MAX_HEADER_RULES}`);
        break;
      }
      const words = tokens(raw);
      current = null;
      skipping = true;
      if (words.length > 1) {
        problem(words[1]!.column, 'a path stands alone on its line; its headers go on the indented lines below it');
        continue;
      }
      const path = pathPattern(words[0]!);
      if (isProblem(path)) {
        problem(path.column, path.message);
        continue;
      }
      skipping = false;
      current = { path, set: [], detach: [] };
      rules.push(current);
      continue;
    }
    const column = indent + 1;
    if (!current) {
      if (!skipping) problem(column, 'a header belongs to a path: put the path on an unindented line above it');
      continue;
    }
    if (trimmed.startsWith('!')) {
      const name = trimmed.slice(1).trim();
      if (!TOKEN.test(name)) {
        problem(column, `${trimmed}: "! Name" takes off a header set by an earlier rule, by its name`);
        continue;
      }
      current.detach.push(name.toLowerCase());
      continue;
    }
    const colon = trimmed.indexOf(':');
    if (colon <= 0) {
      problem(column, `${trimmed}: a header line is "Name: value"`);
      continue;
    }
    const name = trimmed.slice(0, colon).trim();
    const value = trimmed.slice(colon + 1).trim();
    if (!TOKEN.test(name)) {
      problem(column, `${name}: a header's name is letters, digits and !#$%&'*+.^_\`|~-`);
      continue;
    }
    if (RESERVED_HEADERS.has(name.toLowerCase()) || name.toLowerCase().startsWith('berth-')) {
      problem(column, `${name}: Berth sets this header itself; a rule may not`);
      continue;
    }
    if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(value)) {
      problem(column + colon + 1, `${name}: a header's value has no control characters`);
      continue;
    }
    current.set.push([name, value]);
  }
  return { rules, problems };
}
