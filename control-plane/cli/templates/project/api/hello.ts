// Served at /api/hello for any method. A v0 function is one self-contained file: no imports, only
// standard web APIs (Request, Response, fetch) and ctx.

/** What Berth hands every function (see docs/runtime.md for all of it). */
type BerthContext = {
  siteId: string;
  data: {
    readJson(path: string): Promise<unknown>;
    writeJson(path: string, value: unknown): Promise<void>;
  };
  db: {
    query(sql: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
    first(sql: string, params?: unknown[]): Promise<Record<string, unknown> | null>;
    execute(sql: string, params?: unknown[]): Promise<{ changes: number; lastInsertRowId: number | null }>;
  };
  secrets: { get(name: string): Promise<string | null> };
};

export default async function (req: Request, ctx: BerthContext): Promise<Response> {
  // data/visits.json lives in the site's bucket, beside the files you deploy.
  const visits = ((await ctx.data.readJson('visits.json')) as number | null) ?? 0;
  await ctx.data.writeJson('visits.json', visits + 1);
  const name = new URL(req.url).searchParams.get('name') ?? 'world';
  return Response.json({ hello: name, visits: visits + 1, site: ctx.siteId });
}
