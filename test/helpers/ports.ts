// A loopback TCP port nothing listens on: taken from the kernel, then released. A server started on it
// next is almost certainly alone there; a client that connects to it is refused. The kernel may hand a
// released port out again at once, so one test process never gets the same port twice: two servers
// being started side by side cannot both be told the same one.
import net from 'node:net';

const given = new Set<number>();

function onePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export async function freePort(): Promise<number> {
  for (;;) {
    const port = await onePort();
    if (given.has(port)) continue;
    given.add(port);
    return port;
  }
}
