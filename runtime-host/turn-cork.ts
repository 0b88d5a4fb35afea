// Frames written in the same turn of the event loop leave in one write: requests that arrive on many
// connections at once cost the process at the other end (a worker, a site database) one read.
import type { Writable } from 'node:stream';

const corked = new WeakSet<Writable>();

/** Holds `stream`'s writes until the next turn, unless they are held already; call before each write. */
export function corkForTurn(stream: Writable): void {
  if (corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  setImmediate(() => {
    corked.delete(stream);
    stream.uncork();
  });
}
