// One ctx.db.first per request: measured against the hello-world function.
export default async function (_req: Request, ctx: any): Promise<Response> {
  return Response.json(await ctx.db.first('SELECT v FROM kv WHERE k = ?', ['hello']));
}
