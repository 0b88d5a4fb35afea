// The same outbound fetch as fetch-deno.ts, from a function: through Berth's egress proxy.
export default async function (_req: Request): Promise<Response> {
  return new Response(await (await fetch('http://11.0.0.2/hello')).text());
}
