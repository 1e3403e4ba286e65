/**
 * The rollout rule for event versions (ADR 0039), as a check: during a rollout release N+1 runs beside
 * release N, so N+1 may *write* an event version only if N *reads* it. A release that introduces a new
 * shape first ships reading it while still writing the old one (EventSchemas' `writes` pin); the next
 * release writes it. The versions a release reads are in its snapshot (`eventsRead`); the versions the
 * code writes come from its registry.
 */
import type { AggregateRegistry } from '../../src/registry/registry.js';

type Versions = Record<string, Record<string, number>>;

/** Per stream type, the event types with more than one version and the version read / written of each. */
export function eventVersions(registry: AggregateRegistry, which: 'reads' | 'writes'): Versions {
  const out: Versions = {};
  for (const aggregate of registry.modules.flatMap((m) => m.aggregates)) {
    const schemas = aggregate.events;
    if (!schemas) continue;
    const versions = which === 'reads' ? schemas.readVersions() : schemas.writeVersions();
    if (Object.keys(versions).length > 0) out[aggregate.streamType] = versions;
  }
  return out;
}

/** What the next release writes that the previous one cannot read (empty: the pair may run side by side). */
export function rolloutViolations(previousReads: Versions, nextWrites: Versions, previous: string): string[] {
  const violations: string[] = [];
  for (const [streamType, types] of Object.entries(nextWrites)) {
    for (const [type, version] of Object.entries(types)) {
      const reads = previousReads[streamType]?.[type] ?? 1;
      if (version > reads) {
        violations.push(
          `${streamType} event ${type}: written in version ${version}, but release ${previous} reads up to ${reads} — keep writing ${reads} (a downcaster) for one release`,
        );
      }
    }
  }
  return violations;
}
