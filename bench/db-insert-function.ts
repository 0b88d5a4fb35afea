// One ctx.db INSERT per request, the row carrying when it was written: the replication benchmark's
// write, and what it reads back from a restored replica.
export default async function (_req: Request, ctx: any): Promise<Response> {
  return Response.json(await ctx.db.execute('INSERT INTO writes (at) VALUES (?)', [Date.now()]));
}
