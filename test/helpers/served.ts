// Clients of a `berth serve` process (test/helpers/process.ts): its owner, whose keys a first start
// prints once, and a site it hosts.
import got, { type ExtendOptions, type Got } from 'got';
import { type TestAccount, apiClient } from './berth.ts';
import type { ServeProcess } from './process.ts';

/**
 * The owner account a first start on an empty data dir printed, with API clients on `url` (by default
 * the server's own; another node of the same instance takes the same keys).
 */
export function ownerOf(server: ServeProcess, url = server.url): TestAccount {
  const output = server.output();
  const printed = (label: string) => new RegExp(`${label}:\\s+(\\S+)`).exec(output)?.[1];
  const [id, writeKey, readKey] = [printed('account'), printed('WRITE key'), printed('READ key')];
  if (!id || !writeKey || !readKey)
    throw new Error(`berth serve printed no owner keys (was its data dir not empty?); its output:\n${output}`);
  return { id, writeKey, readKey, api: apiClient(url, writeKey), read: apiClient(url, readKey) };
}

/** Client for the site at `<subdomain>.localhost` on `server`; redirects are answers, not followed. */
export const siteOn = (server: ServeProcess, subdomain: string, options: ExtendOptions = {}): Got =>
  got.extend(
    {
      prefixUrl: server.url,
      headers: { host: `${subdomain}.localhost:${new URL(server.url).port}` },
      throwHttpErrors: false,
      followRedirect: false,
      retry: { limit: 0 },
    },
    options,
  );
