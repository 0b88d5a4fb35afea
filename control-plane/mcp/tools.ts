// The MCP tools: the spec's 25 operations for MCP, and those of domains, deployments and database time travel, listed here; everything else about them (input
// schema, permission, what they do) comes from the operation catalogue.
import { z } from 'zod';
import { operationByName } from '../operations/index.ts';
import { type Operation, isReadOnly } from '../operations/operation.ts';

export const MCP_TOOL_NAMES = [
  'list_buckets',
  'create_bucket',
  'get_bucket',
  'update_bucket',
  'list_sites',
  'create_site',
  'get_site',
  'update_site',
  'list_domains',
  'add_domain',
  'verify_domain',
  'remove_domain',
  'list_deployments',
  'get_deployment',
  'update_deployment',
  'create_deployment',
  'publish_deployment',
  'promote_deployment',
  'restore_site',
  'list_files',
  'read_file',
  'write_file',
  'delete_file',
  'list_file_versions',
  'read_file_version',
  'restore_file_version',
  'list_functions',
  'list_secrets',
  'set_secret',
  'delete_secret',
  'list_databases',
  'create_database',
  'query_database',
  'list_database_migrations',
  'get_database_migration',
  'apply_database_migration',
  'get_database_restore_points',
  'restore_database',
  'get_site_analytics',
] as const;

export const mcpTools: Operation[] = MCP_TOOL_NAMES.map((name) => {
  const operation = operationByName.get(name);
  if (!operation) throw new Error(`the MCP tool ${name} has no operation in the catalogue`);
  return operation;
});

/** A tool as tools/list describes it. */
export function describeTool(operation: Operation) {
  const { $schema: _ignored, ...inputSchema } = z.toJSONSchema(operation.input, {
    io: 'input',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  const readOnly = isReadOnly(operation);
  return {
    name: operation.name,
    description: operation.description,
    inputSchema: inputSchema as { type: 'object'; [key: string]: unknown },
    annotations: {
      readOnlyHint: readOnly,
      destructiveHint: !readOnly && operation.destructive === true,
    },
  };
}
