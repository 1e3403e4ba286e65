/**
 * Readiness: may this process take work (and, for the API, traffic)? `checkReadiness(deps)` answers the
 * body of `/readyz`: the database, the probes roles register (sinks, consumers, and `role:<name>`, which
 * fails once the role is stopping, so traffic drains first), and seed 003's lease-age rule after the
 * startup wait: every required lease (each projection's, and those registrations declare for a role this
 * process runs) held and renewed within its threshold, and each projection's lag within bounds. Ages are
 * the database clock's (invariant 6). Liveness is only "the process answers": a restart fixes nothing
 * readiness checks. ADR 0013, ADR 0019.
 */
import {
  type LeaseAgeRow,
  leaseAges,
  type ProjectionLagRow,
  ping,
  projectionLag,
} from '../adapters/postgres/observability-queries.js';
import { errorMessage } from '../errors.js';
import type { SqlClient } from '../ports/database.js';
import { checkpointName, type Projection, type ProjectionSource } from '../projections/projection.js';
import { projectorLeaseName } from '../projections/projector.js';
import type { ObservabilitySettings } from '../settings/core.js';

export interface ReadinessCheck {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface ReadinessReport {
  readonly ok: boolean;
  readonly checks: readonly ReadinessCheck[];
}

export interface ReadinessProbe {
  readonly name: string;
  check(): { ok: boolean; detail: string };
}

/** The probes a role registers on its runtime (its broker connections, its own state). */
export class ReadinessProbes {
  private readonly probes = new Set<ReadinessProbe>();

  /** Adds a probe; returns the function that removes it. */
  add(name: string, check: ReadinessProbe['check']): () => void {
    const probe = { name, check };
    this.probes.add(probe);
    return () => this.probes.delete(probe);
  }

  list(): ReadinessProbe[] {
    return [...this.probes];
  }
}

/** What must stay fresh: the leases and checkpoints of the registered projections. */
export interface LeaseRequirements {
  readonly leases: readonly string[];
  readonly checkpoints: readonly { name: string; projection: string; source: ProjectionSource }[];
}

/** What readiness reads of a registry: the leases its slices' pollers hold, and its projections. */
export interface LeaseSources {
  readonly leases: readonly { readonly name: string; readonly role: string }[];
  readonly projections: ReadonlyMap<string, Projection>;
}

export function leaseRequirements(
  registries: Iterable<LeaseSources>,
  roles: Iterable<string> = [],
): LeaseRequirements {
  const leases = new Set<string>();
  const checkpoints = new Map<string, { name: string; projection: string; source: ProjectionSource }>();
  const running = new Set(roles);
  for (const registry of registries) {
    for (const lease of registry.leases) if (running.has(lease.role)) leases.add(lease.name);
    for (const projection of registry.projections.values()) {
      leases.add(projectorLeaseName(projection.name));
      for (const source of projection.sources) {
        const name = checkpointName(projection.name, source, { shadow: false });
        checkpoints.set(name, { name, projection: projection.name, source });
      }
    }
  }
  return { leases: [...leases].sort(), checkpoints: [...checkpoints.values()] };
}

export interface LeaseCheckSettings {
  /** A lease renewed longer ago than this fails; 0 turns the lease check off. */
  readonly maxLeaseAgeSeconds: number;
  /** A checkpoint whose oldest unapplied entry is older fails; 0 turns the lag check off. */
  readonly maxProjectionLagSeconds: number;
  /**
   * True during the startup wait (seed 003): lease and lag failures are reported, but do not fail
   * readiness yet (a projector starting beside this process has not taken its lease).
   */
  readonly inStartupGrace: boolean;
}

export interface ReadinessDeps {
  readonly db: SqlClient;
  /** Bound on each database read; a slower answer counts as unreachable. */
  readonly timeoutMs: number;
  readonly probes?: Iterable<ReadinessProbe>;
  /** Seed 003's lease-age check; omitted: not checked. */
  readonly leases?: LeaseRequirements & LeaseCheckSettings;
}

const round = (seconds: number) => (seconds < 10 ? seconds.toFixed(1) : String(Math.round(seconds)));

function graced(check: ReadinessCheck, inStartupGrace: boolean): ReadinessCheck {
  return check.ok || !inStartupGrace
    ? check
    : { ...check, ok: true, detail: `${check.detail} (startup wait: not failing readiness yet)` };
}

/** Seed 003's rule over the `lease` table's rows: required leases present and fresh, held ones fresh. */
export function evaluateLeases(
  rows: readonly LeaseAgeRow[],
  settings: { required: readonly string[] } & Omit<LeaseCheckSettings, 'maxProjectionLagSeconds'>,
): ReadinessCheck[] {
  if (settings.maxLeaseAgeSeconds <= 0) return [];
  const byName = new Map(rows.map((row) => [row.name, row]));
  const max = settings.maxLeaseAgeSeconds;
  const names = [...new Set([...settings.required, ...rows.filter((r) => r.held).map((r) => r.name)])];
  return names.map((name) => {
    const row = byName.get(name);
    const check: ReadinessCheck = !row
      ? { name: `lease:${name}`, ok: false, detail: 'missing: no replica has ever taken it' }
      : row.ageSeconds > max
        ? {
            name: `lease:${name}`,
            ok: false,
            detail: `renewed ${round(row.ageSeconds)} s ago by ${row.owner} (older than ${max} s): ${row.held ? 'its holder stopped renewing it' : 'no replica holds it'}`,
          }
        : {
            name: `lease:${name}`,
            ok: true,
            detail: `renewed ${round(row.ageSeconds)} s ago by ${row.owner}`,
          };
    return graced(check, settings.inStartupGrace);
  });
}

/** Each checkpoint exists and its oldest unapplied entry is within the threshold. */
export function evaluateProjections(
  rows: readonly ProjectionLagRow[],
  settings: Omit<LeaseCheckSettings, 'maxLeaseAgeSeconds'>,
): ReadinessCheck[] {
  if (settings.maxProjectionLagSeconds <= 0) return [];
  const max = settings.maxProjectionLagSeconds;
  return rows.map((row) => {
    const name = `projection:${row.name}`;
    const check: ReadinessCheck = !row.present
      ? { name, ok: false, detail: 'no checkpoint: no projector has run it' }
      : row.lagSeconds > max
        ? {
            name,
            ok: false,
            detail: `oldest unapplied ${row.source === 'events' ? 'event' : 'receipt'} is ${round(row.lagSeconds)} s old (more than ${max} s)`,
          }
        : {
            name,
            ok: true,
            detail: row.lagSeconds === 0 ? 'caught up' : `${round(row.lagSeconds)} s behind`,
          };
    return graced(check, settings.inStartupGrace);
  });
}

function withTimeout<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A process's readiness check as the role endpoint (and the API) serve it: the configured thresholds,
 * the registries and probes of what the process runs (read at each call), the startup wait counted
 * from this call.
 */
export function processReadiness(
  settings: ObservabilitySettings,
  deps: {
    readonly db: SqlClient;
    readonly registries: () => Iterable<LeaseSources>;
    readonly probes: () => Iterable<ReadinessProbe>;
    /** The roles this process runs (their registered leases are required); default none. */
    readonly roles?: () => Iterable<string>;
  },
): () => Promise<ReadinessReport> {
  const startedAt = performance.now();
  return () =>
    checkReadiness({
      db: deps.db,
      timeoutMs: settings.readyTimeoutMs,
      probes: deps.probes(),
      leases: {
        ...leaseRequirements(deps.registries(), deps.roles?.() ?? []),
        maxLeaseAgeSeconds: settings.maxLeaseAgeSeconds,
        maxProjectionLagSeconds: settings.maxProjectionLagSeconds,
        inStartupGrace: performance.now() - startedAt < settings.startupGraceMs,
      },
    });
}

export async function checkReadiness(deps: ReadinessDeps): Promise<ReadinessReport> {
  const checks: ReadinessCheck[] = [];
  const started = performance.now();
  let databaseUp = false;
  try {
    await withTimeout(ping(deps.db), deps.timeoutMs);
    databaseUp = true;
    checks.push({
      name: 'database',
      ok: true,
      detail: `select 1 answered in ${Math.round(performance.now() - started)} ms`,
    });
  } catch (error) {
    checks.push({ name: 'database', ok: false, detail: `unreachable: ${errorMessage(error)}` });
  }
  for (const probe of deps.probes ?? []) {
    try {
      checks.push({ name: probe.name, ...probe.check() });
    } catch (error) {
      checks.push({ name: probe.name, ok: false, detail: `probe failed: ${errorMessage(error)}` });
    }
  }
  // Without the database the lease and lag checks cannot be read: the `database` check says why.
  const leases = deps.leases;
  if (databaseUp && leases && (leases.maxLeaseAgeSeconds > 0 || leases.maxProjectionLagSeconds > 0)) {
    try {
      const [leaseRows, lagRows] = await withTimeout(
        Promise.all([
          leases.maxLeaseAgeSeconds > 0 ? leaseAges(deps.db) : Promise.resolve([]),
          leases.maxProjectionLagSeconds > 0
            ? projectionLag(deps.db, leases.checkpoints)
            : Promise.resolve([]),
        ]),
        deps.timeoutMs,
      );
      checks.push(
        ...evaluateLeases(leaseRows, { ...leases, required: leases.leases }),
        ...evaluateProjections(lagRows, leases),
      );
    } catch (error) {
      checks.push({ name: 'leases', ok: false, detail: `could not be read: ${errorMessage(error)}` });
    }
  }
  return { ok: checks.every((c) => c.ok), checks };
}
