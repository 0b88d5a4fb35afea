// HTTP-01 challenges in flight, in the metadata: the CA may reach any node of the instance on port 80,
// and each answers from here. A challenge is removed once its validation has ended either way; ones a
// killed process left are removed after a day.
import type { Deps } from '../deps.ts';

const LEFTOVER_MS = 24 * 3600_000;

export const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';

export async function putChallenge(
  deps: Pick<Deps, 'db' | 'now'>,
  hostname: string,
  token: string,
  keyAuthorization: string,
): Promise<void> {
  await deps
    .db('tls_challenges')
    .insert({ token, key_authorization: keyAuthorization, hostname, created_at: deps.now().toISOString() })
    .onConflict('token')
    .merge();
}

export async function removeChallenge(deps: Pick<Deps, 'db'>, token: string): Promise<void> {
  await deps.db('tls_challenges').where({ token }).delete();
}

/** The key authorization a token's challenge expects, if it is in flight. */
export async function keyAuthorization(deps: Pick<Deps, 'db'>, token: string): Promise<string | undefined> {
  const row = (await deps.db('tls_challenges').where({ token }).first('key_authorization')) as
    | { key_authorization: string }
    | undefined;
  return row?.key_authorization;
}

export async function removeLeftoverChallenges(deps: Pick<Deps, 'db' | 'now'>): Promise<void> {
  await deps
    .db('tls_challenges')
    .where('created_at', '<', new Date(deps.now().getTime() - LEFTOVER_MS).toISOString())
    .delete();
}
