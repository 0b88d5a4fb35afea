// A deployment as the API answers it, and what the CLI says of one: each file's problem in the form
// editors turn into a link, and the counts of its diff.
export interface FileProblem {
  path: string;
  message: string;
  /** 1-based; 0 when the problem is not at a place in the file. */
  line: number;
  column: number;
}

export interface Deployment {
  id: string;
  shortId: string;
  kind: 'DEPLOY' | 'FILE' | 'PROMOTE' | 'RESTORE' | 'BASELINE';
  status: 'UPLOADING' | 'PUBLISHED' | 'FAILED';
  current: boolean;
  message: string | null;
  author: string;
  files: number;
  bytes: number;
  createdAt: string;
  publishedAt: string | null;
  sourceDeploymentId: string | null;
  restoredAt: string | null;
  /** A whole restore's database restore: the second it went back to, and the moment before it. */
  databaseRestore?: { restoredTo: string; restoredFrom: string } | null;
  errors: FileProblem[] | null;
  previewUrl: string;
}

export interface LockedPackage {
  name: string;
  version: string;
  integrity: string | null;
}

/** The branch of the site's database a deployment's preview runs on. */
export interface DatabaseBranch {
  branch: string;
  status: 'MAKING' | 'READY' | 'FAILED';
  madeFrom: 'history' | 'copy' | null;
  asOf: string | null;
  bytes: number;
  error: string | null;
}

export interface DeploymentDetail extends Deployment {
  missing: string[];
  databaseBranch: DatabaseBranch | null;
  fileList: Array<{ path: string; sha256: string | null; bytes: number; versionId: string | null }>;
  /** The npm packages its functions are built with (the site's deno.lock after it). */
  packages: LockedPackage[];
  diff: {
    added: string[];
    changed: string[];
    removed: string[];
    packages: {
      added: LockedPackage[];
      removed: LockedPackage[];
      changed: Array<{ name: string; from: string[]; to: string[] }>;
    };
  };
}

/** `api/x.ts:3:7: …`; a problem at no place is `api/x.ts: …`, one of no file its message alone. */
export function problemLine(problem: FileProblem): string {
  if (!problem.path) return problem.message;
  const at = problem.line > 0 ? `:${problem.line}:${problem.column}` : '';
  return `${problem.path}${at}: ${problem.message}`;
}

/** `2 added, 1 changed, 0 removed`. */
export const diffCounts = (diff: DeploymentDetail['diff']) =>
  `${diff.added.length} added, ${diff.changed.length} changed, ${diff.removed.length} removed`;
