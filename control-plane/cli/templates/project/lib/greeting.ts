// A module the site's functions share: files under lib/ are deployed with them and imported by
// relative path, never served. api/hello.ts and api/goodbye.ts both import this one.

/** Who to greet: the `name` query parameter, trimmed to 40 characters, or "world". */
export function nameToGreet(req: Request): string {
  const name = new URL(req.url).searchParams.get('name')?.trim().slice(0, 40);
  return name || 'world';
}
