// A loopback TCP port nothing listens on: taken from the kernel, then released. A server started on it
// next is almost certainly alone there; a client that connects to it is refused. The kernel may hand a
// released port out again at once, so one test process never gets the same port twice: two servers
// being started side by side cannot both be told the same one.
import { loopbackPort } from '../../control-plane/loopback-port.ts';

const given = new Set<number>();

export async function freePort(): Promise<number> {
  for (;;) {
    const port = await loopbackPort();
    if (given.has(port)) continue;
    given.add(port);
    return port;
  }
}
