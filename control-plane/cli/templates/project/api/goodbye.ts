// Served at /api/goodbye: the same lib/greeting.ts as api/hello.ts, in a function of its own.
import { nameToGreet } from '../lib/greeting.ts';

export default function (req: Request): Response {
  return new Response(`Goodbye, ${nameToGreet(req)}!\n`);
}
