// `berth serve`: start the server, print the owner's keys on first run, stop cleanly on SIGTERM, SIGINT
// or SIGHUP (a second SIGINT exits at once).
import type { Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { startBerth } from '../server.ts';
import { SET_PASSWORD_PATH } from '../services/sign-in-links.ts';

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
        `The owner user is ${berth.owner.email}. Set its password within 24 hours, once, at:`,
        `  ${berth.publicUrl}${SET_PASSWORD_PATH}?token=${berth.owner.signInToken}`,
        'A new link: `npx berth admin reset-password --email <email>`.',
        '',
        '',
      ].join('\n'),
    );
  }
  const stopped = new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        // A repeated SIGTERM or SIGHUP is not an operator insisting: `make` passes its own SIGTERM on to
        // the server 10 ms after the process group got one, and supervisors repeat theirs. Only a
        // second Ctrl-C at the terminal cuts the grace period short.
        if (signal !== 'SIGINT') {
          log.info(
            { signal },
            'already shutting down; requests in flight keep their grace period (Ctrl-C again to exit at once)',
          );
          return;
        }
        // Storage survives a crash by design, and workers end with their channel.
        log.warn({ signal }, 'second signal; exiting without waiting for requests in flight');
        log.flush(() => process.exit(1));
        return;
      }
      stopping = true;
      log.info({ signal }, 'shutting down; letting requests in flight finish');
      berth.close().then(
        () => {
          log.info('stopped');
          log.flush(() => resolve(0));
        },
        (err: unknown) => {
          log.error({ err }, 'shutdown failed');
          log.flush(() => resolve(1));
        },
      );
    };
    // `on`, not `once`: a later signal must find a listener, or Node's default action would kill the
    // process in the middle of its shutdown. SIGHUP (the terminal went away) stops it like SIGTERM.
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, stop);
  });
  // Only now: whoever waits for this line may signal at once, and must find the handlers in place.
  log.info(
    { url: berth.url, publicUrl: berth.publicUrl, sites: berth.deps.siteUrl('<subdomain>'), dataDir: config.dataDir },
    'listening',
  );
  return stopped;
}
