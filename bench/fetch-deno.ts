// An outbound fetch served bare by `deno serve` (allowed to reach the target directly), the baseline
// of the egress benchmark: each request fetches a page of a server on a public-looking address.
export default {
  async fetch(_req: Request): Promise<Response> {
    return new Response(await (await fetch('http://11.0.0.2/hello')).text());
  },
};
