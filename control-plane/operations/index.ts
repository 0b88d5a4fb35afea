// The operation catalogue: everything Berth can do for an actor, each defined once. REST binds most of
// them to routes (http/routes/), MCP serves the spec's tools from it (mcp/), the CLI builds commands.
import * as accounts from './accounts.ts';
import * as analytics from './analytics.ts';
import * as buckets from './buckets.ts';
import * as databases from './databases.ts';
import * as deploymentOps from './deployments.ts';
import * as domains from './domains.ts';
import * as files from './files.ts';
import * as functions from './functions.ts';
import type { Operation } from './operation.ts';
import * as people from './people.ts';
import * as secrets from './secrets.ts';
import * as sites from './sites.ts';

function isOperation(value: unknown): value is Operation {
  return typeof value === 'object' && value !== null && 'run' in value && 'input' in value;
}

export const operations: Operation[] = [
  accounts,
  buckets,
  sites,
  domains,
  deploymentOps,
  files,
  functions,
  secrets,
  databases,
  people,
  analytics,
].flatMap((module) => Object.values(module).filter(isOperation));

export const operationByName = new Map(operations.map((operation) => [operation.name, operation]));
