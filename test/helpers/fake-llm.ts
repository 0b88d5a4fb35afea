// A model provider of the test's own on loopback, speaking the OpenAI chat completions and Anthropic
// Messages protocols. The last user message steers it: "slow" answers after 2 s, "fail" answers 500.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeProvider {
  url: string;
  requests: Array<{ path: string; headers: http.IncomingHttpHeaders; body: any }>;
  close(): Promise<void>;
}

export async function startFakeProvider(): Promise<FakeProvider> {
  const requests: FakeProvider['requests'] = [];
  const server = http.createServer(async (req, res) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    const body = JSON.parse(text);
    requests.push({ path: req.url ?? '', headers: req.headers, body });
    const last = [...body.messages].reverse().find((m: { role: string }) => m.role === 'user')?.content ?? '';
    if (last === 'fail') return res.writeHead(500).end('{"error":"boom"}');
    if (last === 'slow') await new Promise((resolve) => setTimeout(resolve, 2000));
    if (res.destroyed) return;
    const reply = `echo: ${last}`;
    res.setHeader('content-type', 'application/json');
    if (req.url === '/v1/messages') {
      res.end(
        JSON.stringify({
          id: 'msg_1',
          model: body.model,
          content: [{ type: 'text', text: reply }],
          usage: { input_tokens: 11, output_tokens: 3 },
        }),
      );
    } else {
      res.end(
        JSON.stringify({
          id: 'chatcmpl-1',
          model: body.model,
          choices: [{ message: { role: 'assistant', content: reply } }],
          usage: { prompt_tokens: 9, completion_tokens: 2 },
        }),
      );
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
