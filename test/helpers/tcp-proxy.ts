// A TCP proxy between one node and a server it depends on, whose line a test can cut and mend, or
// slow down: cut, the node's connections are reset and new ones refused, as a network partition does;
// slowed, every byte is delivered, in order, `ms` later in each direction, as on a congested link.
// Everything else (its clients, the other nodes) still reaches both.
import net from 'node:net';

export interface TcpProxy {
  port: number;
  cut(): void;
  mend(): void;
  /** Delays what crosses the line from now on by `ms` in each direction (0: no delay). */
  slow(ms: number): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let cut = false;
  let delayMs = 0;
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  /** Forwards `from` to `to`, each chunk `delayMs` after it arrived and never before the one before it. */
  const forward = (from: net.Socket, to: net.Socket) => {
    let due = 0;
    const later = (work: () => void) => {
      due = Math.max(due, Date.now() + delayMs);
      const timer = setTimeout(
        () => {
          timers.delete(timer);
          if (!to.destroyed) work();
        },
        Math.max(0, due - Date.now()),
      );
      timers.add(timer);
    };
    from.on('data', (chunk: Buffer) =>
      delayMs === 0 && due <= Date.now() ? to.write(chunk) : later(() => to.write(chunk)),
    );
    from.on('end', () => later(() => to.end()));
  };
  const server = net.createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    mend() {
      cut = false;
    },
    slow(ms: number) {
      delayMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
