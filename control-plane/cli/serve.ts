// `berth serve`: start the server, print the owner's keys on first run, stop cleanly on SIGTERM/SIGINT.
import type { Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { startBerth } from '../server.ts';

export async function serve(config: Config): Promise<number> {
  const log = createLogger(config.logLevel);
  const berth = await startBerth(config, { log });
  if (berth.owner) {
    process.stdout.write(
      [
        '',
        'Berth created the owner account of this instance. Its API keys are shown this once only:',
        `  account:   ${berth.owner.accountId}`,
        `  WRITE key: ${berth.owner.writeKey}`,
        `  READ key:  ${berth.owner.readKey}`,
        'Keep them safe; more keys can be made with `npx berth admin create-key`.',
        '',
        '',
      ].join('\n'),
    );
  }
  log.info({ url: berth.url, sites: berth.deps.siteUrl('<subdomain>'), dataDir: config.dataDir }, 'listening');

  return new Promise((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'shutting down; letting requests in flight finish');
      berth.close().then(
        () => {
          log.info('stopped');
          log.flush(() => resolve(0));
        },
        (err: unknown) => {
          log.error({ err }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
