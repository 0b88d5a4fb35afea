// The npm packages a deno.lock pins, as a deployment lists them, and what changed between two locks.
// A lock that is not Deno's JSON pins nothing that can be listed.

export interface LockedPackage {
  name: string;
  version: string;
  integrity: string | null;
}

export interface PackageChanges {
  added: LockedPackage[];
  removed: LockedPackage[];
  /** A package whose versions changed, by name: from the versions before to the versions after. */
  changed: Array<{ name: string; from: string[]; to: string[] }>;
}

/** `name@version` keys of a lock's npm section, scoped names included (`@scope/name@1.0.0`). */
export function lockedPackages(lock: Buffer | null): LockedPackage[] {
  if (!lock) return [];
  let npm: Record<string, { integrity?: string }> = {};
  try {
    npm = (JSON.parse(lock.toString('utf8')) as { npm?: typeof npm }).npm ?? {};
  } catch {
    return [];
  }
  return Object.entries(npm)
    .map(([key, value]) => {
      const at = key.lastIndexOf('@');
      return { name: key.slice(0, at), version: key.slice(at + 1), integrity: value.integrity ?? null };
    })
    .filter((p) => p.name && p.version)
    .sort((a, b) => (a.name === b.name ? (a.version < b.version ? -1 : 1) : a.name < b.name ? -1 : 1));
}

export function packageChanges(before: LockedPackage[], after: LockedPackage[]): PackageChanges {
  const byName = (list: LockedPackage[]) => {
    const names = new Map<string, LockedPackage[]>();
    for (const p of list) names.set(p.name, [...(names.get(p.name) ?? []), p]);
    return names;
  };
  const was = byName(before);
  const now = byName(after);
  const changes: PackageChanges = { added: [], removed: [], changed: [] };
  for (const [name, versions] of now) {
    const previous = was.get(name);
    if (!previous) changes.added.push(...versions);
    else {
      const from = previous.map((p) => p.version);
      const to = versions.map((p) => p.version);
      if (from.join() !== to.join()) changes.changed.push({ name, from, to });
    }
  }
  for (const [name, versions] of was) if (!now.has(name)) changes.removed.push(...versions);
  return changes;
}
