// The change feed (control-plane/db/changes.ts) on every metadata backend this process can reach:
// what a server publishes once committed reaches its own listeners before publish resolves, in order;
// what it publishes with a write reaches them once the write has committed, and never if it rolls back;
// on PostgreSQL it also reaches every other server sharing the metadata (LISTEN/NOTIFY), once, and a
// server whose listening connection is lost is told to resync. On SQLite it stays in the process.
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import type { Change, ChangeFeed, ChangeListener } from '../../control-plane/db/changes.ts';
import type { Metadata } from '../../control-plane/db/metadata.ts';
import { connectOnce } from '../../control-plane/db/postgres/connection.ts';
import { PostgresChanges } from '../../control-plane/db/postgres/changes.ts';
import { FILE_COLUMNS, type FileRow } from '../../control-plane/services/file-rows.ts';
import { type MetadataBackend, type OpenedMetadata, eachMetadataBackend } from '../helpers/each-adapter.ts';
import { seedFile, seedSite, sha256 } from '../helpers/metadata-rows.ts';
import { asAdmin, berthUrl } from '../helpers/postgres.ts';
import { until } from '../helpers/until.ts';

const CHANNEL = 'berth_changes';

/** What a listener was told, in order. */
class Heard implements ChangeListener {
  readonly events: Array<Change | 'resync'> = [];
  change(change: Change): void {
    this.events.push(change);
  }
  resync(): void {
    this.events.push('resync');
  }
  get changes(): Change[] {
    return this.events.filter((e): e is Change => e !== 'resync');
  }
}

async function open(t: ExecutionContext, backend: MetadataBackend): Promise<OpenedMetadata> {
  const opened = await backend.open();
  t.teardown(opened.close);
  return opened;
}

/** A feed of `metadata`, closed before the metadata is; its connection losses are collected in `lost`. */
async function feedOf(t: ExecutionContext, metadata: Metadata, lost: Error[] = []): Promise<ChangeFeed> {
  const feed = await metadata.openChanges((err) => lost.push(err));
  t.teardown(() => feed.close());
  return feed;
}

const file = (path: string): Change => ({ kind: 'file', bucketId: 'b', path });
const CHANGES: Change[] = [
  file('a.txt'),
  { kind: 'sites', siteId: 's' },
  { kind: 'function', siteId: 's', name: 'hello', functionId: 'f', versionId: 'v1' },
  { kind: 'function', siteId: 's', name: 'hello', functionId: 'f', versionId: null },
  { kind: 'database', siteId: 's' },
  { kind: 'certificate', hostname: 'shop.example.org' },
  { kind: 'domains' },
  { kind: 'bucket', bucketId: 'b', siteId: 's' },
  file('b.txt'),
];

/** The server processes of the database that LISTEN on the feed's channel. */
async function listeners(database: string): Promise<number[]> {
  return asAdmin(async (client) => {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query = $2 ORDER BY pid',
      [database, `LISTEN ${CHANNEL}`],
    );
    return rows.map((r) => r.pid);
  });
}

for (const backend of eachMetadataBackend()) {
  const name = `[${backend.name}]`;

  test(`${name} a published change reaches every listener of the feed before publish resolves, in order`, async (t) => {
    const { metadata } = await open(t, backend);
    const feed = await feedOf(t, metadata);
    const early = new Heard();
    const also = new Heard();
    feed.subscribe(early);
    feed.subscribe(also);
    for (const change of CHANGES.slice(0, 3)) await feed.publish(change);
    const late = new Heard();
    feed.subscribe(late);
    for (const change of CHANGES.slice(3)) await feed.publish(change);
    t.deepEqual(early.events, CHANGES);
    t.deepEqual(also.events, CHANGES);
    t.deepEqual(late.events, CHANGES.slice(3), 'a listener hears what is published once it subscribed');
  });

  test(`${name} a listener that hears of a write reads the write, in every server that hears it`, async (t) => {
    const opened = await open(t, backend);
    const { db, hot } = opened.metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const servers = backend.name === 'postgres' ? [opened.metadata, await opened.another()] : [opened.metadata];
    // What a cache does on a change: forget, and read again, each server from its own metadata connection.
    const reads = new Map<Metadata, Promise<string | null | undefined>>();
    const feeds: ChangeFeed[] = [];
    for (const server of servers) {
      const feed = await feedOf(t, server);
      feed.subscribe({
        change: () =>
          reads.set(
            server,
            server.hot
              .get<FileRow>(`SELECT ${FILE_COLUMNS} FROM files WHERE id = ?`, fileId)
              .then((f) => f?.current_version_id),
          ),
        resync() {},
      });
      feeds.push(feed);
    }
    await hot.write((tx) => tx.run('UPDATE files SET current_version_id = NULL WHERE id = ?', fileId));
    await feeds[0]!.publish({ kind: 'file', bucketId: site.bucketId, path: 'a.txt' });
    t.true(reads.has(opened.metadata), 'the publishing server has read again before publish resolves');
    await until(() => reads.size === servers.length, 'every server hearing the change');
    t.deepEqual(
      await Promise.all(reads.values()),
      servers.map(() => null),
      'the committed write is what each reads',
    );
  });

  test(`${name} a change published with a write reaches every server once the write commits, and nobody when it rolls back`, async (t) => {
    const opened = await open(t, backend);
    const { db, hot } = opened.metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const feed = await feedOf(t, opened.metadata);
    const here = new Heard();
    feed.subscribe(here);
    const other = backend.name === 'postgres' ? await feedOf(t, await opened.another()) : undefined;
    const there = new Heard();
    other?.subscribe(there);

    const written = file('a.txt');
    let heardInWork: Array<Change | 'resync'> | undefined;
    await hot.write(async (tx) => {
      await tx.run('UPDATE files SET current_version_id = NULL WHERE id = ?', fileId);
      feed.publishWith(tx, written);
      heardInWork = [...here.events];
    });
    t.deepEqual(heardInWork, [], 'nobody hears of the write before it commits');
    t.deepEqual(here.events, [written], 'this server has heard of it once the write resolves');

    const refused = new Error('the work gives up');
    await t.throwsAsync(
      hot.write(async (tx) => {
        await tx.run('UPDATE files SET current_version_id = NULL WHERE id = ?', fileId);
        feed.publishWith(tx, file('rolled-back.txt'));
        throw refused;
      }),
      { is: refused },
    );
    await feed.publish(file('after.txt'));
    t.deepEqual(here.events, [written, file('after.txt')], 'a write that rolled back published nothing');
    if (other) {
      await until(() => there.events.length >= 2, 'the other server hearing both');
      t.deepEqual(there.events, [written, file('after.txt')], 'the other server heard the committed write only');
    }
  });

  if (backend.name === 'sqlite') {
    test(`${name} a change stays in the process that published it`, async (t) => {
      const opened = await open(t, backend);
      const here = await feedOf(t, opened.metadata);
      const there = await feedOf(t, await opened.another());
      const heardThere = new Heard();
      there.subscribe(heardThere);
      await here.publish(file('a.txt'));
      t.deepEqual(heardThere.events, [], 'another process never caches what this one owns: one server per data dir');
    });
    continue;
  }

  test(`${name} a change published by one server reaches another's listeners in order, once each`, async (t) => {
    const opened = await open(t, backend);
    const one = await feedOf(t, opened.metadata);
    const other = await feedOf(t, await opened.another());
    const heardOne = new Heard();
    const heardOther = new Heard();
    one.subscribe(heardOne);
    other.subscribe(heardOther);
    for (const change of CHANGES) await one.publish(change);
    await until(() => heardOther.events.length >= CHANGES.length, 'the other server hearing every change');
    // Once the other server has heard its reply, this one has heard its own notifications too: it skips them.
    await other.publish(file('reply.txt'));
    await until(() => heardOne.events.length > CHANGES.length, 'the reply');
    t.deepEqual(heardOther.events, [...CHANGES, file('reply.txt')]);
    t.deepEqual(heardOne.events, [...CHANGES, file('reply.txt')], 'a server applies its own changes once');
  });

  test(`${name} a notification that is not a change is ignored`, async (t) => {
    const opened = await open(t, backend);
    const one = await feedOf(t, opened.metadata);
    const other = await feedOf(t, await opened.another());
    const heard = new Heard();
    other.subscribe(heard);
    await asAdmin(async (client) => {
      for (const payload of [
        'not json',
        '[]',
        '{"origin":"x","change":{"kind":"drop tables"}}',
        '{"origin":"x","change":{"kind":"file","bucketId":1,"path":"a"}}',
        '{"origin":"x","change":{"kind":"function","siteId":"s","name":"n","functionId":"f"}}',
      ])
        await client.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]);
    }, opened.database);
    await one.publish(file('real.txt'));
    await until(() => heard.events.length > 0, 'the real change');
    t.deepEqual(heard.events, [file('real.txt')]);
  });

  test(`${name} a server whose listening connection is lost is told to resync, and hears changes again`, async (t) => {
    const opened = await open(t, backend);
    const database = opened.database!;
    const lost: Error[] = [];
    const one = await feedOf(t, opened.metadata);
    const other = await feedOf(t, await opened.another(), lost);
    const heard = new Heard();
    other.subscribe(heard);
    const before = await listeners(database);
    t.is(before.length, 2, 'both servers listen');
    // Both servers' connections are cut, as a restart of PostgreSQL or a network fault would.
    await asAdmin((client) =>
      client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query = $2', [
        database,
        `LISTEN ${CHANNEL}`,
      ]),
    );
    await until(() => heard.events.includes('resync'), 'the resync');
    t.true(lost.length > 0, 'the loss is reported');
    t.false(
      (await listeners(database)).some((pid) => before.includes(pid)),
      'it listens on a new connection',
    );
    await one.publish(file('after.txt'));
    await until(() => heard.changes.length > 0, 'a change published after the loss');
    t.deepEqual(heard.events, ['resync', file('after.txt')]);
  });

  test(`${name} a closed feed hears nothing more and leaves no connection listening`, async (t) => {
    const opened = await open(t, backend);
    const database = opened.database!;
    const one = await feedOf(t, opened.metadata);
    const closing = await feedOf(t, await opened.another());
    const witness = await feedOf(t, await opened.another());
    const heardClosed = new Heard();
    const heardWitness = new Heard();
    closing.subscribe(heardClosed);
    witness.subscribe(heardWitness);
    t.is((await listeners(database)).length, 3);
    await closing.close();
    t.is((await listeners(database)).length, 2);
    await one.publish(file('a.txt'));
    await until(() => heardWitness.events.length > 0, 'the witness hearing the change');
    t.deepEqual(heardClosed.events, [], 'what the witness heard did not reach the closed feed');
  });

  test(`${name} a feed closed while it reconnects stays closed`, async (t) => {
    const opened = await open(t, backend);
    const database = opened.database!;
    const url = berthUrl(database);
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    t.teardown(() => pool.end());
    // Every connection after the first is held at the door until the test lets it in.
    let letIn!: () => void;
    const door = new Promise<void>((resolve) => (letIn = resolve));
    const clients: pg.Client[] = [];
    const feed = new PostgresChanges(
      pool,
      () => {
        const client = connectOnce(url);
        if (clients.push(client) > 1) {
          const connect = pg.Client.prototype.connect as (this: pg.Client) => Promise<pg.Client>;
          Object.assign(client, { connect: () => door.then(() => connect.call(client)) });
        }
        return client;
      },
      () => {},
    );
    await feed.start();
    t.teardown(() => feed.close());
    const heard = new Heard();
    feed.subscribe(heard);
    await asAdmin((client) =>
      client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query = $2', [
        database,
        `LISTEN ${CHANNEL}`,
      ]),
    );
    const reconnecting = await until(() => clients[1], 'a reconnection');
    await feed.close();
    let ended = false;
    reconnecting.once('end', () => {
      ended = true;
    });
    letIn();
    await until(() => ended, 'the connection made after the close to be ended');
    t.deepEqual(await listeners(database), [], 'no connection listens for a closed feed');
    t.deepEqual(heard.events, [], 'a closed feed tells its listeners nothing');
  });
}
