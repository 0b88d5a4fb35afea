// Peer calls without their network hop: a Peers that hands each call, as the JSON
// body a node would send, to the holding node's own answerCall (its placement check, its provider, its
// error mapping) and reads the JSON answer back with outcomeOf, as PeerClient does with what comes
// over HTTP. The holding node's databases are real, in a second SiteDatabases of the same process.
// Signatures and TLS are the business of the cluster's own tests (test/cluster.test.ts).
import fsp from 'node:fs/promises';
import {
  type CallAnswer,
  type CallServer,
  answerCall,
} from '../../control-plane/site-databases/cluster/peer-server.ts';
import { type Peers, outcomeOf, answerValue } from '../../control-plane/site-databases/cluster/peer-client.ts';
import {
  DUMP,
  type PeerOp,
  type PeerAnswer,
  type PeerRequest,
} from '../../control-plane/site-databases/cluster/peer-protocol.ts';
import { StatementError } from '../../control-plane/site-databases/provider.ts';

/** What travels back: the answer as bytes of JSON, as the HTTP body carries it. */
const overTheWire = (answer: CallAnswer) => ({
  status: answer.status,
  body: Buffer.from(JSON.stringify(answer.body)),
});

export class InProcessPeers implements Peers {
  readonly #nodes = new Map<string, CallServer>();

  constructor(readonly caller: string) {}

  /** Makes `node` answer the calls sent to `address`. */
  serve(address: string, node: CallServer): void {
    this.#nodes.set(address, node);
  }

  #node(address: string): CallServer {
    const node = this.#nodes.get(address);
    // What PeerClient says of a node that refuses the connection.
    if (!node) throw new StatementError('unavailable', 'the node that holds the site\u2019s database is not answering');
    return node;
  }

  async call<O extends PeerOp>(
    address: string,
    siteId: string,
    op: O,
    request: PeerRequest<O>,
  ): Promise<PeerAnswer<O>> {
    const node = this.#node(address);
    const body = Buffer.from(JSON.stringify(request));
    const answer = await answerCall(node, siteId, op, body, this.caller, () => {
      throw new Error(`${op} is not a dump`);
    });
    return outcomeOf(op, overTheWire(answer!));
  }

  async dump(address: string, siteId: string, file: string): Promise<number> {
    const node = this.#node(address);
    let sent: number | undefined;
    const answer = await answerCall(node, siteId, DUMP, Buffer.from('{}'), this.caller, async (dumped, bytes) => {
      await fsp.copyFile(dumped, file);
      sent = bytes;
    });
    if (answer) answerValue(overTheWire(answer));
    if (sent === undefined) throw new Error('the dump was neither sent nor refused');
    return sent;
  }

  close(): void {}
}
