// `berth mcp`: Berth's MCP tools over stdio, for MCP clients that start a local command. The tools
// run on the server at BERTH_URL with BERTH_API_KEY: this process only relays.
import type { CommandDefinition } from '../command.ts';
import { connectionFromEnv } from '../connection.ts';

export const mcpCommand: CommandDefinition = {
  usage: 'mcp',
  summary: 'serve Berth’s MCP tools over stdio, for MCP clients that start a command',
  examples: ['BERTH_URL=http://127.0.0.1:8080 BERTH_API_KEY=berth_… berth mcp'],
  json: false,
  run: async () => {
    const { url, key } = connectionFromEnv();
    const { relayStdio } = await import('../../mcp/stdio.ts');
    await relayStdio(url, key);
  },
};
