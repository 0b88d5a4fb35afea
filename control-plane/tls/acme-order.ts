// One certificate for one name from the ACME CA, by HTTP-01: a new key and order, each authorization's
// challenge put in the metadata for port 80 to answer (on whichever node the CA reaches), the CA told
// to validate, the order finalized with a CSR for the name, the chain fetched. The challenge is removed
// once its validation has ended either way.
import * as acme from 'acme-client';
import type { Deps } from '../deps.ts';
import { putChallenge, removeChallenge } from './challenges.ts';

export interface Issued {
  /** The leaf first, then the chain. */
  certificate: string;
  key: string;
}

export async function orderCertificate(
  deps: Pick<Deps, 'db' | 'now'>,
  client: acme.Client,
  hostname: string,
): Promise<Issued> {
  const key = await acme.crypto.createPrivateEcdsaKey();
  const [, csr] = await acme.crypto.createCsr({ commonName: hostname, altNames: [hostname] }, key);
  const order = await client.createOrder({ identifiers: [{ type: 'dns', value: hostname }] });
  for (const authz of await client.getAuthorizations(order)) {
    if (authz.status === 'valid') continue;
    const challenge = authz.challenges.find((c) => c.type === 'http-01');
    if (!challenge) throw new Error(`the CA offers no http-01 challenge for ${hostname}`);
    const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
    await putChallenge(deps, hostname, challenge.token, keyAuthorization);
    try {
      await client.completeChallenge(challenge);
      await client.waitForValidStatus(challenge);
    } finally {
      await removeChallenge(deps, challenge.token);
    }
  }
  const finalized = await client.finalizeOrder(order, csr);
  return { certificate: await client.getCertificate(finalized), key: key.toString() };
}
