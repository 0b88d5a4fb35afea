// The hello-world function deployed to Berth: the same handler as hello-deno.ts.
export default function (_req: Request): Response {
  return new Response('hello world');
}
