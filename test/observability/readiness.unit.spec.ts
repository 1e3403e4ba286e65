/**
 * The pure parts of readiness: seed 003's lease-age rule over lease rows, the projection lag rule, the
 * startup wait, what the registry requires, and the settings that configure them.
 */
import { describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import {
  evaluateLeases,
  evaluateProjections,
  leaseRequirements,
  ReadinessProbes,
} from '../../src/health/readiness.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import { ledgerRegistration } from '../support/ledger-aggregate.js';

const settings = { maxLeaseAgeSeconds: 60, inStartupGrace: false };
const lease = (name: string, ageSeconds: number, held = true) => ({
  name,
  owner: 'pod-a:1',
  ageSeconds,
  held,
});

describe('evaluateLeases (seed 003: every required lease present and renewed within the threshold)', () => {
  it('passes a fresh required lease, naming its owner', () => {
    const checks = evaluateLeases([lease('projector:stats', 4.25)], {
      ...settings,
      required: ['projector:stats'],
    });
    expect(checks).toEqual([
      { name: 'lease:projector:stats', ok: true, detail: 'renewed 4.3 s ago by pod-a:1' },
    ]);
  });

  it('fails a required lease that is missing or older than the threshold, naming it', () => {
    const checks = evaluateLeases([lease('projector:b', 61, false)], {
      ...settings,
      required: ['projector:a', 'projector:b'],
    });
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['lease:projector:a', false],
      ['lease:projector:b', false],
    ]);
    expect(checks[0]!.detail).toMatch(/missing/);
    expect(checks[1]!.detail).toMatch(/renewed 61 s ago by pod-a:1 \(older than 60 s\): no replica holds it/);
  });

  it('a held lease nobody requires must be fresh too; a released one (a finished rebuild) is ignored', () => {
    const checks = evaluateLeases(
      [
        lease('rebuild:stats', 3_600, false),
        lease('rebuild:other', 90, true),
        lease('rebuild:third', 5, true),
      ],
      { ...settings, required: [] },
    );
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['lease:rebuild:other', false],
      ['lease:rebuild:third', true],
    ]);
    expect(checks[0]!.detail).toMatch(/its holder stopped renewing it/);
  });

  it('during the startup wait a failure is reported but does not fail readiness; 0 turns the check off', () => {
    const [graced] = evaluateLeases([], { ...settings, inStartupGrace: true, required: ['projector:a'] });
    expect(graced).toMatchObject({ name: 'lease:projector:a', ok: true });
    expect(graced!.detail).toMatch(/missing.*startup wait/);
    expect(evaluateLeases([], { ...settings, maxLeaseAgeSeconds: 0, required: ['projector:a'] })).toEqual([]);
  });
});

describe('evaluateProjections', () => {
  const lag = { maxProjectionLagSeconds: 300, inStartupGrace: false };
  it('passes caught-up and slightly behind checkpoints, fails a missing or lagging one', () => {
    const checks = evaluateProjections(
      [
        { name: 'stats', source: 'events', present: true, lagSeconds: 0 },
        { name: 'stats/receipts', source: 'receipts', present: true, lagSeconds: 12 },
        { name: 'other', source: 'events', present: true, lagSeconds: 301 },
        { name: 'never', source: 'events', present: false, lagSeconds: 0 },
      ],
      lag,
    );
    expect(checks).toEqual([
      { name: 'projection:stats', ok: true, detail: 'caught up' },
      { name: 'projection:stats/receipts', ok: true, detail: '12 s behind' },
      {
        name: 'projection:other',
        ok: false,
        detail: 'oldest unapplied event is 301 s old (more than 300 s)',
      },
      { name: 'projection:never', ok: false, detail: 'no checkpoint: no projector has run it' },
    ]);
    expect(
      evaluateProjections([{ name: 'x', source: 'events', present: false, lagSeconds: 0 }], {
        ...lag,
        maxProjectionLagSeconds: 0,
      }),
    ).toEqual([]);
  });
});

describe('leaseRequirements', () => {
  it("are the registered projections' projector leases and live checkpoints, once each", () => {
    const required = leaseRequirements([heraldRegistry, heraldRegistry]);
    expect(required.leases).toEqual(['projector:dispatch_stats']);
    expect(required.checkpoints).toEqual([
      { name: 'dispatch_stats', projection: 'dispatch_stats', source: 'events' },
      { name: 'dispatch_stats/receipts', projection: 'dispatch_stats', source: 'receipts' },
    ]);
    expect(leaseRequirements([new AggregateRegistry([ledgerRegistration('q')])])).toEqual({
      leases: [],
      checkpoints: [],
    });
  });

  it("add the leases a registration declares for a role, only where that role runs (the SMS pollers': scanner)", () => {
    const scanner = leaseRequirements([heraldRegistry], ['scanner']).leases;
    expect(scanner).toEqual(
      expect.arrayContaining([
        'projector:dispatch_stats',
        'sms:dlr-rollup',
        'sms:refund-retry',
        'sms:retry-dispatcher',
      ]),
    );
    expect([...scanner].sort()).toEqual(scanner);
    for (const roles of [[], ['relay', 'worker', 'projector']]) {
      expect(leaseRequirements([heraldRegistry], roles).leases).toEqual(['projector:dispatch_stats']);
    }
    expect(heraldRegistry.leases.filter((l) => l.name.startsWith('sms:')).map((l) => l.role)).toEqual(
      expect.arrayContaining(['scanner']),
    );
  });
});

describe('ReadinessProbes', () => {
  it('lists what roles added until they remove it', () => {
    const probes = new ReadinessProbes();
    const remove = probes.add('broker:amqp', () => ({ ok: true, detail: 'connected' }));
    probes.add('consumers', () => ({ ok: false, detail: 'starting' }));
    expect(probes.list().map((p) => [p.name, p.check().ok])).toEqual([
      ['broker:amqp', true],
      ['consumers', false],
    ]);
    remove();
    expect(probes.list().map((p) => p.name)).toEqual(['consumers']);
  });
});

describe('settings', () => {
  const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };

  it('defaults: port 9464 on every interface, lease age two projector leases, a 60 s startup wait', () => {
    expect(loadConfig(base).observability).toEqual({
      host: '0.0.0.0',
      port: 9464,
      readyTimeoutMs: 1_000,
      maxLeaseAgeSeconds: 60,
      maxProjectionLagSeconds: 300,
      startupGraceMs: 60_000,
    });
    expect(
      loadConfig({ ...base, HERALD_PROJECTOR_LEASE_SECONDS: '45' }).observability.maxLeaseAgeSeconds,
    ).toBe(90);
    const custom = loadConfig({
      ...base,
      HERALD_METRICS_PORT: '0',
      HERALD_METRICS_HOST: '127.0.0.1',
      HERALD_READY_MAX_LEASE_AGE_SECONDS: '0',
    }).observability;
    expect(custom).toMatchObject({ host: '127.0.0.1', port: 0, maxLeaseAgeSeconds: 0 });
  });

  it.each([
    [{ HERALD_METRICS_PORT: '65536' }, 'HERALD_METRICS_PORT'],
    [{ HERALD_METRICS_PORT: 'any' }, 'HERALD_METRICS_PORT'],
    [{ HERALD_READY_TIMEOUT_MS: '0' }, 'HERALD_READY_TIMEOUT_MS'],
    [{ HERALD_READY_MAX_PROJECTION_LAG_SECONDS: '-1' }, 'HERALD_READY_MAX_PROJECTION_LAG_SECONDS'],
    // A threshold at or below the renewal interval (a third of the lease) would fail healthy leases.
    [{ HERALD_READY_MAX_LEASE_AGE_SECONDS: '10' }, 'HERALD_READY_MAX_LEASE_AGE_SECONDS'],
  ])('rejects %j naming the variable', (env, field) => {
    let thrown: unknown;
    try {
      loadConfig({ ...base, ...env });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).field).toBe(field);
  });
});
