// A site's route table for the rules files it has now, compiled once for each content of the pair
// (known by their digests) and kept in a small cache every site shares: a request finds its table with
// the two file lookups hosting caches anyway. A deployment or a write with a broken rules file is
// refused (rules-files.ts), so a table is only ever made of rules that parse; files from before rules
// existed keep the lines that parse.
import { RouteTable } from './route-table.ts';
import { parseHeaders, parseRedirects } from './rules-files.ts';

/** Tables kept, for as many pairs of rules files. */
const KEPT = 512;
const tables = new Map<string, RouteTable>();

/** A rules file as hosting has it: its digest, or null where the site has none. */
export interface RulesFile {
  sha256: string;
}

const keyOf = (redirects: RulesFile | null, headers: RulesFile | null): string =>
  `${redirects?.sha256 ?? ''}:${headers?.sha256 ?? ''}`;

/** The table of these files when it was compiled already; null where the site has no rules files. */
export function compiledRoutes(redirects: RulesFile | null, headers: RulesFile | null): RouteTable | null | undefined {
  if (!redirects && !headers) return null;
  return tables.get(keyOf(redirects, headers));
}

/** The table of these files, compiled from their bytes the first time; null where the site has none. */
export async function compileRoutes(
  redirects: RulesFile | null,
  headers: RulesFile | null,
  read: (sha256: string) => Promise<Buffer>,
): Promise<RouteTable | null> {
  const known = compiledRoutes(redirects, headers);
  if (known !== undefined) return known;
  const text = async (file: RulesFile | null) => (file ? (await read(file.sha256)).toString('utf8') : '');
  const table = new RouteTable(parseRedirects(await text(redirects)).rules, parseHeaders(await text(headers)).rules);
  const key = keyOf(redirects, headers);
  tables.set(key, table);
  if (tables.size > KEPT) tables.delete(tables.keys().next().value!);
  return table;
}
