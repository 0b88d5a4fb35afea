// `berth mcp`: MCP over stdio for clients that start a local command. It relays every message between
// stdio and the server's /mcp endpoint, so the tools, their rules and the key's permission are the
// server's own; nothing is decided here.
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { MCP_PATH } from './server.ts';

/** A JSON-RPC error answering `message`, so a client is never left waiting on a request that failed. */
function failed(message: JSONRPCMessage, reason: string): JSONRPCMessage | null {
  if (!('id' in message) || !('method' in message)) return null;
  return { jsonrpc: '2.0', id: message.id, error: { code: -32000, message: reason } };
}

/** Relays stdin/stdout to `${baseUrl}/mcp` with `key` until stdin closes. */
export async function relayStdio(baseUrl: string, key: string): Promise<void> {
  const remote = new StreamableHTTPClientTransport(new URL(MCP_PATH, baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  const local = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    local.onclose = () => resolve();
  });
  remote.onmessage = (message) => void local.send(message);
  local.onmessage = (message) => {
    remote.send(message).catch((err: Error) => {
      const answer = failed(message, `Berth at ${baseUrl} did not answer: ${err.message}`);
      if (answer) void local.send(answer);
    });
  };
  await remote.start();
  await local.start();
  await closed;
  await remote.close();
}
