// A DNS server for tests: answers A and AAAA queries from a fixed table over UDP on loopback, so the
// egress proxy (BERTH_EGRESS_DNS_SERVERS) can be given names that resolve anywhere.
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import dnsPacket from 'dns-packet';

export interface DnsServer {
  /** host:port, as BERTH_EGRESS_DNS_SERVERS takes it. */
  address: string;
  close(): Promise<void>;
}

export async function startDnsServer(records: Record<string, { A?: string[]; AAAA?: string[] }>): Promise<DnsServer> {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (message, from) => {
    const query = dnsPacket.decode(message);
    const question = query.questions?.[0];
    const found = question ? records[question.name.toLowerCase()] : undefined;
    const type = question?.type === 'AAAA' ? 'AAAA' : 'A';
    const answers = (found?.[type] ?? []).map(
      (data) => ({ type, name: question!.name, ttl: 1, data }) as dnsPacket.Answer,
    );
    const reply = dnsPacket.encode({
      type: 'response',
      id: query.id,
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (found ? 0 : 3),
      questions: query.questions,
      answers,
    });
    socket.send(reply, from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  return {
    address: `127.0.0.1:${(socket.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}
