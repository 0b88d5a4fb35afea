// A loopback TCP port nothing listens on: taken from the kernel, then released. A server started on it
// next is almost certainly alone there; a client that connects to it is refused.
import net from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
