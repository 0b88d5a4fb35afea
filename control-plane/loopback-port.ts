// A loopback TCP port nothing listens on: taken from the kernel, then released, for a helper process
// told where to listen (the replication engine's metrics) and for tests and benchmarks.
import net from 'node:net';

export function loopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
