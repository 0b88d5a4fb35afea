// The metadata's part of a start: the metadata database (SQLite or PostgreSQL, migrated as it opens)
// and the change feed every server's caches follow. Its code lives in db/, below every part.
import { openMetadata } from '../db/metadata.ts';
import type { Part } from '../part.ts';

export const metadataPart: Part = {
  name: 'the metadata',
  async open(_deps, { config, log, stack }) {
    const metadata = await openMetadata(config, {
      deadlines: true,
      onConnectionError: (err) => log.warn({ err }, 'lost a connection to the metadata database'),
    });
    stack.defer('the metadata', () => metadata.close());
    const changes = await metadata.openChanges((err) =>
      log.warn({ err }, 'lost the connection that hears other servers’ changes; reconnecting'),
    );
    stack.defer('the change feed', () => changes.close());
    return { metadata, db: metadata.db, hotSql: metadata.hot, changes };
  },
};
