// Berth's MCP server for one actor: it lists the tools that actor may call (a READ key sees read-only
// tools only) and runs them through the operation catalogue. Transport-free: http/mcp-endpoint.ts serves it over
// Streamable HTTP; `berth mcp` bridges stdio to that endpoint.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { BerthError } from '../errors.ts';
import { knownFailure, logFailure } from '../failures.ts';
import { allows, authorize, parseInput } from '../operations/operation.ts';
import type { Actor, Deps } from '../deps.ts';
import { VERSION } from '../version.ts';
import { describeTool, mcpTools } from './tools.ts';

/** A failed call, as every front door reports it: the error envelope, here as the tool's result. */
function failure(err: BerthError): CallToolResult {
  const error = { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error }) }], structuredContent: { error } };
}

/** Where the control-plane host serves MCP over HTTP (http/mcp-endpoint.ts) and `berth mcp` relays to. */
export const MCP_PATH = '/mcp';

export function createMcpServer(deps: Deps, actor: Actor): Server {
  const server = new Server({ name: 'berth', version: VERSION }, { capabilities: { tools: {} } });
  const visible = mcpTools.filter((tool) => allows(tool, actor));

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: visible.map(describeTool) }));

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const tool = mcpTools.find((candidate) => candidate.name === request.params.name);
    try {
      if (!tool) throw new BerthError('unknown_tool', `no tool named "${request.params.name}"; tools/list names them`);
      authorize(tool, actor);
      const output = (await tool.run(deps, actor, parseInput(tool, request.params.arguments ?? {}))) as Record<
        string,
        unknown
      >;
      return { content: [{ type: 'text', text: JSON.stringify(output) }], structuredContent: output };
    } catch (err) {
      const known = knownFailure(err);
      const error =
        known ?? new BerthError('internal_error', 'the tool failed unexpectedly; the server log has the details');
      logFailure(deps.log, { tool: request.params.name }, err, error, !known);
      return failure(error);
    }
  });
  return server;
}
