// How provider calls name a database: a site's own by the site's id, a branch of it (a preview's copy,
// docs/deployments.md) by `<siteId>.<branch>`, where a branch is a deployment's id or an instant,
// `t<unix ms>`. A branch lives beside its site's database, on the node that holds it, so a call for
// either is routed by the site's id.

const SITE = '[0-9a-f-]{36}';
const BRANCH = `(?:${SITE}|t\\d{13})`;
const BRANCH_NAME = new RegExp(`^(${SITE})\\.(${BRANCH})$`);
const SITE_NAME = new RegExp(`^${SITE}$`);
const BRANCH_ID = new RegExp(`^${BRANCH}$`);

/** Whether `branch` is a branch's id: a deployment's id, or an instant. */
export const isBranchId = (branch: string): boolean => BRANCH_ID.test(branch);

/** The name a branch of the site's database is called by. */
export function branchName(siteId: string, branch: string): string {
  const name = `${siteId}.${branch}`;
  if (!BRANCH_NAME.test(name)) throw new Error(`not a database branch: ${name}`);
  return name;
}

/** The site and branch a database name is of; `branch` is null for the site's own database. Throws on anything else. */
export function parseDatabaseName(name: string): { siteId: string; branch: string | null } {
  if (SITE_NAME.test(name)) return { siteId: name, branch: null };
  const match = BRANCH_NAME.exec(name);
  if (!match) throw new Error(`not a database name: ${name}`);
  return { siteId: match[1]!, branch: match[2]! };
}

/** The site whose database, or branch of it, a name is. */
export const siteOfDatabase = (name: string): string => parseDatabaseName(name).siteId;

export const isBranchName = (name: string): boolean => BRANCH_NAME.test(name);
