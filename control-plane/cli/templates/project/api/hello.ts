/// <reference path="../berth.d.ts" />
// Served at /api/hello for any method. A v0 function is one self-contained file: no imports, only
// standard web APIs (Request, Response, fetch) and ctx. The reference above gives editors the types
// of ctx (BerthContext); the runtime reads it as a comment.

export default async function (req: Request, ctx: BerthContext): Promise<Response> {
  // data/visits.json lives in the site's bucket, beside the files you deploy.
  const visits = ((await ctx.data.readJson('visits.json')) as number | null) ?? 0;
  await ctx.data.writeJson('visits.json', visits + 1);
  const name = new URL(req.url).searchParams.get('name') ?? 'world';
  return Response.json({ hello: name, visits: visits + 1, site: ctx.siteId });
}
