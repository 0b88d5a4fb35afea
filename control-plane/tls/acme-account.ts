// The instance's ACME account: one key per directory, sealed with the master key in the metadata, made
// by whichever node needs it first (a second node's key loses the insert and is dropped). The account
// agrees to the CA's terms: the operator did so by setting BERTH_TLS=acme (docs/deploy.md).
import * as acme from 'acme-client';
import type { TlsConfig } from '../config.ts';
import { open, seal } from '../../storage/master-key.ts';
import type { Deps } from '../deps.ts';

const accountContext = (directory: string) => `acme-account:${directory}`;

async function accountKey(deps: Pick<Deps, 'db' | 'masterKey' | 'now'>, directory: string): Promise<string> {
  const read = async () =>
    (await deps.db('tls_accounts').where({ directory_url: directory }).first('key_sealed')) as
      | { key_sealed: string }
      | undefined;
  let row = await read();
  if (!row) {
    const key = (await acme.crypto.createPrivateEcdsaKey()).toString();
    await deps
      .db('tls_accounts')
      .insert({
        directory_url: directory,
        key_sealed: seal(deps.masterKey, key, accountContext(directory)),
        created_at: deps.now().toISOString(),
      })
      .onConflict('directory_url')
      .ignore();
    row = await read();
  }
  return open(deps.masterKey, row!.key_sealed, accountContext(directory));
}

/** An ACME client signed in to the instance's account at the directory, registering it on first use. */
export async function acmeClient(deps: Pick<Deps, 'db' | 'masterKey' | 'now'>, tls: TlsConfig): Promise<acme.Client> {
  const client = new acme.Client({
    directoryUrl: tls.directory,
    accountKey: await accountKey(deps, tls.directory),
    // Polls for a validation's or an order's outcome from a quarter of a second, doubling to 10 s.
    backoffAttempts: 12,
    backoffMin: 250,
    backoffMax: 10_000,
  });
  await client.createAccount({
    termsOfServiceAgreed: true,
    ...(tls.email ? { contact: [`mailto:${tls.email}`] } : {}),
  });
  return client;
}
