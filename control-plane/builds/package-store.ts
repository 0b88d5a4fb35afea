// The npm packages builds used, kept once for every site and node: each version's tarball a blob, its
// row with the integrity it was checked against and the version's entry of the registry's document, so
// the registry front (package-registry.ts) serves it to later builds without the registry.
import type { Deps } from '../deps.ts';
import { timestamp } from '../deps.ts';
import { keepReferenced } from './kept-blobs.ts';
import type { PackageStore, StoredPackage } from './package-registry.ts';

interface PackageRow {
  name: string;
  version: string;
  integrity: string;
  tarball_sha256: string;
  manifest: string;
  published_at: string | null;
}

export function packageStore(deps: Pick<Deps, 'blobs' | 'db' | 'hotSql' | 'now'>): PackageStore {
  return {
    async versions(name) {
      const rows = (await deps
        .db('npm_packages')
        .where({ name })
        .select('name', 'version', 'integrity', 'tarball_sha256', 'manifest', 'published_at')) as PackageRow[];
      return rows.map((row) => ({
        name: row.name,
        version: row.version,
        integrity: row.integrity,
        manifest: JSON.parse(row.manifest) as Record<string, unknown>,
        publishedAt: row.published_at,
      }));
    },
    async tarball(name, version) {
      // Marked used as it is taken, so that it is not forgotten meanwhile (unused-builds.ts).
      const row = await deps.hotSql.write((sql) =>
        sql.get<{ tarball_sha256: string }>(
          'UPDATE npm_packages SET used_at = ? WHERE name = ? AND version = ? RETURNING tarball_sha256',
          timestamp(deps),
          name,
          version,
        ),
      );
      return row ? deps.blobs.read(row.tarball_sha256) : null;
    },
    async keep(pkg: StoredPackage, tarball: Buffer) {
      await keepReferenced(deps, tarball, (sql, blob) =>
        sql.run(
          `INSERT INTO npm_packages (name, version, integrity, tarball_sha256, tarball_bytes, manifest, published_at, created_at, used_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name, version) DO UPDATE SET used_at = excluded.used_at`,
          pkg.name,
          pkg.version,
          pkg.integrity,
          blob.sha256,
          blob.bytes,
          JSON.stringify(pkg.manifest),
          pkg.publishedAt,
          timestamp(deps),
          timestamp(deps),
        ),
      );
    },
  };
}
