// MCP over Streamable HTTP at /mcp on the control-plane host, authenticated with the same API keys as
// the REST API. Stateless: each request gets a server for its key's actor and a transport of its own,
// answered with plain JSON.
import type Koa from 'koa';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Deps } from '../deps.ts';
import { readJsonBody } from './json-body.ts';
import { authenticateRequest } from './middleware/auth.ts';
import { MCP_PATH, createMcpServer } from '../mcp/server.ts';

export function mcpEndpoint(deps: Deps): Koa.Middleware {
  return async (ctx, next) => {
    if (ctx.path !== MCP_PATH) return next();
    const actor = await authenticateRequest(ctx, deps);
    const body = ctx.method === 'POST' ? await readJsonBody(ctx, deps.config.maxJsonBytes) : undefined;
    const server = createMcpServer(deps, actor);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    ctx.res.once('close', () => void server.close());
    // The transport writes the response itself.
    ctx.respond = false;
    await transport.handleRequest(ctx.req, ctx.res, body);
  };
}
