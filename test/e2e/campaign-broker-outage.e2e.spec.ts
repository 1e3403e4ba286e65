/**
 * Seed 000's "roll back on publish failure", replaced by the outbox (invariant 2): with the broker
 * down a claim still commits; the campaign stays DISPATCHING with its outbox row pending (retried
 * with backoff); when the broker returns the message is delivered once, with no rollback and no
 * second claim — once at LINE (the LINE test server: each planned chunk accepted once, nobody twice).
 * STOPS AND STARTS THE SHARED RabbitMQ: serial project only.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import {
  type LineWorld,
  lineAcceptancesPerChunk,
  lineEnv,
  lineWorld,
  startTestLineSimulator,
  TEST_LINE_CONTENT,
  testLineSettings,
} from '../support/line.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

const run = promisify(execFile);
const services = (command: 'stop' | 'start') =>
  run('bash', ['scripts/services', command, 'rabbitmq'], { cwd: process.cwd(), timeout: 180_000 });

let t: TestDatabase;
let roles: RunningRoles | undefined;
let brokerDown = false;
let simulator: LineSimulator;
let world: LineWorld;

beforeAll(async () => {
  simulator = await startTestLineSimulator();
});
afterAll(async () => {
  await simulator?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
  simulator.reset();
  world = await lineWorld(t.db, simulator, testLineSettings(simulator), {
    audiences: { 'aud-warm': 10, 'aud-1': { members: 600, from: 1_000 } },
  });
});
afterEach(async () => {
  if (brokerDown) await services('start');
  brokerDown = false;
  await roles?.stop();
  await t?.drop();
});

describe('campaign dispatch through a broker outage', () => {
  it('keeps the claim and the pending outbox row, then delivers once when the broker is back', async () => {
    const service = campaignService(t.db);
    // Warm up: roles connected, queues declared.
    roles = startRoles(
      t.config({
        HERALD_SCANNER_POLL_MS: '200', // the test's service sends no scanner wake-ups
        HERALD_RELAY_IDLE_POLL_MS: '200',
        HERALD_RELAY_BACKOFF_BASE_MS: '100',
        HERALD_RELAY_BACKOFF_MAX_MS: '1000',
        ...lineEnv(simulator),
      }),
      { relay: true, scanner: true, worker: true },
    );
    const warm = await service.create(
      lineCampaign({ name: 'warm-up', audienceId: 'aud-warm', ...TEST_LINE_CONTENT }),
    );
    await service.activate(warm.campaignId);
    await waitFor(async () => (await service.get(warm.campaignId)).status === 'COMPLETED', {
      what: 'warm-up',
    });

    await services('stop');
    brokerDown = true;
    const c = await service.create(lineCampaign({ name: 'during outage', ...TEST_LINE_CONTENT }));
    await service.activate(c.campaignId);
    await waitFor(async () => (await service.get(c.campaignId)).status === 'DISPATCHING', { what: 'claim' });
    const pending = await waitFor(
      async () => {
        const { rows } = await t.db.query<{ status: string; attempts: number; next_attempt_at: Date }>(
          `select o.status, o.attempts, o.next_attempt_at from outbox o join event e on e.position = o.event_position
            where e.stream_id = $1`,
          [c.campaignId],
        );
        return rows[0] && rows[0].attempts >= 2 ? rows[0] : undefined;
      },
      { what: 'failed publish attempts', timeoutMs: 30_000 },
    );
    expect(pending.status).toBe('pending');
    expect((await service.get(c.campaignId)).status).toBe('DISPATCHING');

    await services('start');
    brokerDown = false;
    await waitFor(async () => (await service.get(c.campaignId)).status === 'COMPLETED', {
      what: 'delivery after the broker returned',
      timeoutMs: 60_000,
    });
    // At LINE: each of the campaign's two chunks accepted once (the warm-up's one chunk too), nobody twice.
    const requests = simulator.stats(world.channelId).requests;
    expect(lineAcceptancesPerChunk(requests, await service.get(c.campaignId))).toEqual([1, 1]);
    expect(lineAcceptancesPerChunk(requests, await service.get(warm.campaignId))).toEqual([1]);
    expect(requests).toHaveLength(3);
    expect(simulator.distinctRecipients(world.channelId)).toBe(610);
    expect(simulator.usersReceivedMoreThanOnce(world.channelId)).toEqual([]);
    expect(simulator.violationCount).toBe(0);
    const types = (await service.history(c.campaignId)).map((e) => e.type);
    expect(types).toEqual([
      'CampaignCreated',
      'CampaignActivated',
      'CampaignClaimed',
      'LineDeliveryPlanned',
      'LineChunkAccepted',
      'LineChunkAccepted',
      'CampaignCompleted',
    ]);
  });
});
