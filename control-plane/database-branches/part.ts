// The database branches' part of a start: which branches this node knows are made (following the
// change feed), the way the services reach a branch, and the sweep that ends branches with their
// previews (branch-sweep.ts).
import type { Deps } from '../deps.ts';
import type { Part } from '../part.ts';
import { onBranch } from './branches.ts';
import { BranchSweep } from './branch-sweep.ts';
import { ReadyBranches } from './ready-branches.ts';

declare module '../deps.ts' {
  interface Deps {
    /** The branches of site databases this node knows are made. */
    readyBranches: ReadyBranches;
    /**
     * Runs `work` on the branch `branch` of the site's database, given its name, made first if it is not
     * yet (branches.ts, onBranch): how the services below this part reach a preview's branch.
     */
    onBranch: <T>(siteId: string, branch: string, work: (name: string) => Promise<T>) => Promise<T>;
  }
}

export const databaseBranchesPart: Part = {
  name: 'the database branches',
  open: (deps) => ({
    readyBranches: new ReadyBranches(),
    // Called once every part is open: `deps` is the whole of Deps by then.
    onBranch: (siteId, branch, work) => onBranch(deps as Deps, siteId, branch, work),
  }),
  listens: (deps) => [deps.readyBranches],
  start(deps, stack) {
    stack.started('the sweep of database branches', new BranchSweep(deps));
  },
};
