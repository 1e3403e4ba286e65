/**
 * What a registration is made of (ADR 0020), without a database: ports are built lazily, once per
 * context, and `withPorts` replaces one default adapter without touching the rest; a slice refuses a
 * configuration loaded without its settings; the campaign's operation catalogue is what the views show
 * (a dispatching SMS campaign may be cancelled, a dispatching LINE one may not).
 */
import { describe, expect, it } from 'vitest';
import { campaignRegistration } from '../../src/aggregates/campaign/index.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { loadConfig } from '../../src/config.js';
import { EMPTY_LINE_PROGRESS, newLineFacts } from '../../src/domain/campaign/line.js';
import { CAMPAIGN_OPERATIONS, type ExistingCampaign } from '../../src/domain/campaign.js';
import { availableOperations } from '../../src/domain/operations.js';
import { ValidationError } from '../../src/errors.js';
import type { CommandHandler } from '../../src/eventstore/command-handler.js';
import type { Database } from '../../src/ports/database.js';
import { defineModule } from '../../src/registry/module.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import { defineSettings, describeSetting } from '../../src/settings/fragment.js';
import { loadSettings } from '../../src/settings/load.js';
import { positiveInt } from '../../src/settings/validators.js';

const db = {} as Database;
const handler = {} as CommandHandler;
const env = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };

describe('ports', () => {
  const built: string[] = [];
  const clocks = defineModule({
    name: 'clocks',
    aggregates: [],
    ports: {
      clock: () => {
        built.push('clock');
        return 'system';
      },
      zone: () => 'UTC',
    },
    service: ({ ports }) => ({ clocks: { read: () => `${ports.clock}@${ports.zone}` } }),
  });
  const config = loadConfig(env);

  it('are built on first use, once per context', () => {
    built.length = 0;
    const service = clocks.service({ db, handler, config, logger: undefined as never }) as {
      clocks: { read(): string };
    };
    expect(built).toEqual([]);
    expect(service.clocks.read()).toBe('system@UTC');
    expect(service.clocks.read()).toBe('system@UTC');
    expect(built).toEqual(['clock']);
  });

  it('withPorts replaces one default adapter and keeps the others; an unknown port is refused', () => {
    const replaced = clocks.withPorts({ clock: () => 'frozen' });
    const service = replaced.service({ db, handler, config, logger: undefined as never }) as {
      clocks: { read(): string };
    };
    expect(service.clocks.read()).toBe('frozen@UTC');
    expect(() => clocks.withPorts({ calendar: () => 'x' })).toThrow(/has no port calendar/);
    expect(() => campaignRegistration.withPorts({ billing: () => ({}) })).not.toThrow();
  });
});

describe('settings', () => {
  const retries = defineSettings({
    key: 'retries',
    title: 'Retries',
    env: { HERALD_TEST_RETRIES: describeSetting(positiveInt.default(3), 'how many') },
    map: (e) => ({ count: e.HERALD_TEST_RETRIES }),
  });
  const slice = defineModule({
    name: 'retrying',
    aggregates: [],
    settings: [retries],
    service: ({ config }) => ({ retrying: { count: () => config.retries.count } }),
  });

  it('compose into the configuration, typed by the registry', () => {
    const config = new AggregateRegistry([slice]).loadConfig({ ...env, HERALD_TEST_RETRIES: '5' });
    expect(config.retries.count).toBe(5);
  });

  it('a slice refuses a configuration loaded without its settings, naming them', () => {
    const generic = loadSettings(env, []);
    expect(() => slice.service({ db, handler, config: generic, logger: undefined as never })).toThrow(
      ValidationError,
    );
    expect(() => slice.service({ db, handler, config: generic, logger: undefined as never })).toThrow(
      /needs its settings 'retries'/,
    );
  });

  it('a variable declared by two sections is refused when they are composed', () => {
    const twice = defineSettings({ ...retries, key: 'again' });
    expect(() => loadSettings(env, [retries, twice])).toThrow(/HERALD_TEST_RETRIES.*declared twice/);
  });
});

describe("the campaign's operation catalogue", () => {
  const base = {
    campaignId: '6f1c8b2e-7a0f-4d3b-9a51-1f0e2d3c4b5a',
    organizationId: 'org-1',
    channel: 'line',
    deletedAt: null,
    sms: null,
    line: newLineFacts([{ type: 'text', text: 'hello' }]),
    pausedFrom: null,
  } as unknown as ExistingCampaign;
  const linePlanDone = {
    ...newLineFacts([{ type: 'text', text: 'hello' }]),
    plan: { epoch: 1, chunks: 1, recipients: null, plannedAt: '2026-01-01T00:00:00.000Z' },
    progress: { ...EMPTY_LINE_PROGRESS, chunksDone: 1, chunksAccepted: 1 },
  };
  const allowed = (over: Partial<Record<keyof ExistingCampaign, unknown>>) =>
    availableOperations(CAMPAIGN_OPERATIONS, { ...base, ...over } as ExistingCampaign);

  it('offers cancel on a dispatching SMS campaign, not on a dispatching LINE one', () => {
    expect(allowed({ status: 'DISPATCHING', channel: 'sms', sms: {}, line: null })).toEqual([
      'pause',
      'cancel',
    ]);
    expect(allowed({ status: 'DISPATCHING' })).toEqual(['pause']);
  });

  it('follows the rules on the state: a pause from DISPATCHING is not reschedulable, a deleted campaign offers nothing live', () => {
    expect(allowed({ status: 'PAUSED', pausedFrom: 'DISPATCHING' })).toEqual(['resume', 'cancel', 'delete']);
    expect(allowed({ status: 'PAUSED', pausedFrom: 'SCHEDULED' })).toEqual([
      'resume',
      'reschedule',
      'cancel',
      'delete',
    ]);
    expect(allowed({ status: 'DRAFT', deletedAt: '2026-01-01T00:00:00.000Z' })).toEqual([]);
    expect(allowed({ status: 'DRAFT' })).toEqual(['activate', 'schedule', 'send-now', 'edit', 'delete']);
    // A LINE campaign is resent while its plan has chunks left (never planned: all of them).
    expect(allowed({ status: 'FAILED' })).toEqual(['resend', 'delete']);
    expect(allowed({ status: 'FAILED', line: linePlanDone })).toEqual(['delete']);
    expect(allowed({ status: 'FAILED', channel: 'sms', sms: {}, line: null })).toEqual(['resend', 'delete']);
  });

  it("Herald's registry holds its three slices, in order", () => {
    expect(heraldRegistry.modules.map((m) => m.name)).toEqual(['campaign', 'scheduled-action', 'cron']);
  });
});
