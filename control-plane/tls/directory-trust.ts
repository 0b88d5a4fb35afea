// BERTH_ACME_CA_FILE: a CA trusted for the ACME directory's own HTTPS (a test CA, or a private ACME
// server's) besides the system's roots. acme-client sends every request through one axios instance; a
// request interceptor gives the requests to the directory's origin, and no others, an agent that
// trusts it. Nothing else in the process trusts it, and certificate checks stay on.
import fs from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';
import * as acme from 'acme-client';
import { StartupError } from '../startup-error.ts';

/** Trusts the CA in `caFile` for requests to `directory`'s origin; returns what undoes it. */
export function trustDirectoryCa(directory: string, caFile: string): () => void {
  let ca: string;
  try {
    ca = fs.readFileSync(caFile, 'utf8');
  } catch (err) {
    throw new StartupError(
      `BERTH_ACME_CA_FILE is ${caFile}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  const origin = new URL(directory).origin;
  const agent = new https.Agent({ ca: [...tls.rootCertificates, ca], keepAlive: true });
  const id = acme.axios.interceptors.request.use((request) => {
    if (request.url && URL.canParse(request.url) && new URL(request.url).origin === origin) request.httpsAgent = agent;
    return request;
  });
  return () => {
    acme.axios.interceptors.request.eject(id);
    agent.destroy();
  };
}
