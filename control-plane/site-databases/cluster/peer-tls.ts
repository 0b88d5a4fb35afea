// The TLS files of peer calls (BERTH_CLUSTER_TLS_*), read by a node at its start and by the admin
// commands that speak to nodes.
import fs from 'node:fs';
import type { Config } from '../../config.ts';
import { StartupError } from '../../startup-error.ts';

/** This node's certificate and key, and the CA that signed every node's (PEM). */
export interface PeerTls {
  cert: Buffer;
  key: Buffer;
  ca: Buffer;
}

/** The TLS files of peer calls, read once at start; one that cannot be read stops the start. */
export function readPeerTls(files: Config['clusterTls']): PeerTls | null {
  if (!files) return null;
  const read = (name: string, file: string) => {
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new StartupError(
        `${name} is ${file}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  };
  return {
    cert: read('BERTH_CLUSTER_TLS_CERT', files.cert),
    key: read('BERTH_CLUSTER_TLS_KEY', files.key),
    ca: read('BERTH_CLUSTER_TLS_CA', files.ca),
  };
}
