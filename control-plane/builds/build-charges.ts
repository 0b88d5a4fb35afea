// What a site's builds hold: the built modules its functions are served from, and the modules and
// package tarballs its kept deployments hold (the newest BERTH_DEPLOYMENTS_KEPT, as for their files'
// versions), each blob once. `site_build_blobs` is that set, made again under the site's lock by every
// transaction that changes it (a publish, a function built or removed through the file API); each of its
// rows is one reference the account's storage counts (services/functions.ts, chargeSiteBuilds). What no
// site holds any more is forgotten once unused for a while (unused-builds.ts).
import type { Config } from '../config.ts';
import type { HotTx } from '../db/hot-sql.ts';
import { KEPT_DEPLOYMENTS, oldestKeptSeq } from '../history/site-history.ts';
import type { LockedPackage } from './lock-packages.ts';

const BATCH = 200;

/**
 * Records what the published deployment's functions hold once it has switched: the modules they are
 * served from and, when there are any, the tarballs of the packages its lock pins that builds used.
 */
export async function recordDeploymentBuilds(
  sql: HotTx,
  deploymentId: string,
  siteId: string,
  packages: LockedPackage[],
): Promise<void> {
  const { changes } = await sql.run(
    `INSERT INTO deployment_builds (deployment_id, sha256, bytes)
     SELECT ?, module_sha256, MAX(module_bytes) FROM builds
     WHERE module_sha256 IN (SELECT module_sha256 FROM functions WHERE site_id = ? AND module_sha256 IS NOT NULL)
     GROUP BY module_sha256`,
    deploymentId,
    siteId,
  );
  if (changes === 0) return;
  for (let i = 0; i < packages.length; i += BATCH) {
    const keys = packages.slice(i, i + BATCH).map((p) => `${p.name}@${p.version}`);
    const tarballs = await sql.all<{ tarball_sha256: string; tarball_bytes: number | string }>(
      `SELECT tarball_sha256, tarball_bytes FROM npm_packages WHERE name || '@' || version IN (${keys.map(() => '?').join(', ')})`,
      ...keys,
    );
    for (const tarball of tarballs)
      await sql.run(
        'INSERT INTO deployment_builds (deployment_id, sha256, bytes) VALUES (?, ?, ?) ON CONFLICT (deployment_id, sha256) DO NOTHING',
        deploymentId,
        tarball.tarball_sha256,
        Number(tarball.tarball_bytes),
      );
  }
}

/**
 * Makes the site's `site_build_blobs` what its functions and kept deployments hold; returns the blobs it
 * gained and those it lost, for the account's storage to count (services/functions.ts). Call it with
 * the site's lock held.
 */
export async function holdSiteBuilds(
  sql: HotTx,
  config: Pick<Config, 'deploymentsKept'>,
  siteId: string,
): Promise<{ gained: Array<{ sha256: string; bytes: number }>; lost: string[] }> {
  const held = await sql.all<{ sha256: string; bytes: number | string }>(
    `SELECT sha256, MAX(bytes) AS bytes FROM (
       SELECT module_sha256 AS sha256, module_bytes AS bytes FROM builds
       WHERE module_sha256 IN (SELECT module_sha256 FROM functions WHERE site_id = ? AND module_sha256 IS NOT NULL)
       UNION ALL
       SELECT b.sha256, b.bytes FROM deployment_builds b JOIN deployments d ON d.id = b.deployment_id WHERE ${KEPT_DEPLOYMENTS}
     ) held GROUP BY sha256`,
    siteId,
    siteId,
    await oldestKeptSeq(sql, siteId, config.deploymentsKept),
  );
  const had = new Set(
    (await sql.all<{ sha256: string }>('SELECT sha256 FROM site_build_blobs WHERE site_id = ?', siteId)).map(
      (row) => row.sha256,
    ),
  );
  const wanted = new Set(held.map((row) => row.sha256));
  const lost = [...had].filter((sha256) => !wanted.has(sha256));
  for (const sha256 of lost)
    await sql.run('DELETE FROM site_build_blobs WHERE site_id = ? AND sha256 = ?', siteId, sha256);
  const gained = held
    .filter((row) => !had.has(row.sha256))
    .map((row) => ({ sha256: row.sha256, bytes: Number(row.bytes) }));
  for (const blob of gained)
    await sql.run(
      'INSERT INTO site_build_blobs (site_id, sha256, bytes) VALUES (?, ?, ?)',
      siteId,
      blob.sha256,
      blob.bytes,
    );
  return { gained, lost };
}
