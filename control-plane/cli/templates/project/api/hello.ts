/// <reference path="../berth.d.ts" />
// Served at /api/hello for any method. A function imports the site's modules under lib/ by relative
// path and npm packages named in deno.json's imports; deploying builds it with what it imports. The
// reference above gives editors the types of ctx (BerthContext); the runtime reads it as a comment.
import { nameToGreet } from '../lib/greeting.ts';

export default async function (req: Request, ctx: BerthContext): Promise<Response> {
  // data/visits.json lives in the site's bucket, beside the files you deploy.
  const visits = ((await ctx.data.readJson('visits.json')) as number | null) ?? 0;
  await ctx.data.writeJson('visits.json', visits + 1);
  return Response.json({ hello: nameToGreet(req), visits: visits + 1, site: ctx.siteId });
}
