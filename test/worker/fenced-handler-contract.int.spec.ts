/**
 * The fenced-handler contract (src/testing/fenced-handler-contract.ts) over every claimed aggregate of
 * Herald's registry, each through its production definition: the LINE delivery of a DISPATCHING
 * campaign, the fire of a processing action, the execution of a queued run. A claimed aggregate added
 * to the registry without a fixture here fails the first test.
 */
import { describe, expect, it } from 'vitest';
import { UndiciHttpClient } from '../../src/adapters/http/undici-http-client.js';
import { lineMessagingApi } from '../../src/adapters/line/messaging-api.js';
import { lineDelivery } from '../../src/aggregates/campaign/line/delivery.js';
import { LineRateLimiter } from '../../src/aggregates/campaign/line/rate-limit.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { cronExecutor } from '../../src/aggregates/cron/executors.js';
import { jobRunAggregate } from '../../src/aggregates/cron/run-descriptor.js';
import { runExecution } from '../../src/aggregates/cron/run-execution.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { scheduledActionAggregate } from '../../src/aggregates/scheduled-action/descriptor.js';
import { actionFire } from '../../src/aggregates/scheduled-action/fire.js';
import { defaultActionPorts } from '../../src/aggregates/scheduled-action/processing.js';
import { ScheduledActionService } from '../../src/aggregates/scheduled-action/service.js';
import { lineRetryKey } from '../../src/domain/campaign/line.js';
import type { Database } from '../../src/ports/database.js';
import {
  type ClaimPayload,
  describeFencedHandlerContract,
  type FencedHandlerFixture,
} from '../../src/testing/fenced-handler-contract.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { cronService, startHttpServer, type TestHttpServer } from '../support/cron.js';
import { type LineWorld, lineWorld, startTestLineSimulator, testLineSettings } from '../support/line.js';
import { testLogger } from '../support/roles.js';
import { createTestDatabase } from '../support/services.js';

const database = async () => {
  const t = await createTestDatabase();
  return { db: t.db, close: () => t.drop() };
};

/** The payload of the one message the outbox holds for a stream's claim. */
async function claimMessage(db: Database, destination: string, idField: string, id: string) {
  const { rows } = await db.query<{ payload: ClaimPayload }>(
    `select payload from outbox where destination = $1 and payload->>$2 = $3 order by id desc limit 1`,
    [destination, idField, id],
  );
  if (!rows[0]) throw new Error(`no ${destination} message for ${id}`);
  return rows[0].payload;
}

const count = async (db: Database, sql: string, value: unknown) =>
  (await db.query<{ n: number }>(sql, [value])).rows[0]!.n;

/** The LINE test server the campaign's delivery calls, with the channel of `oa-1` registered on both sides. */
let line: { simulator: LineSimulator; world: LineWorld } | undefined;
const campaign: FencedHandlerFixture = {
  database: async () => {
    const base = await database();
    const simulator = await startTestLineSimulator();
    line = { simulator, world: await lineWorld(base.db, simulator, testLineSettings(simulator)) };
    return {
      db: base.db,
      close: async () => {
        await simulator.close();
        await base.close();
      },
    };
  },
  definition: (handler) =>
    lineDelivery({
      handler,
      logger: testLogger(),
      messaging: lineMessagingApi({ baseUrl: line!.simulator.url, timeoutMs: 5_000 }),
      directory: line!.world.directory,
      rateLimiter: new LineRateLimiter({ limits: testLineSettings(line!.simulator).rateLimits }),
      settings: { maxThrottleWaitMs: 5_000 },
    }),
  async claim(db) {
    const service = campaignService(db);
    const { campaignId } = await service.create(lineCampaign({ castType: 'broadcast' }));
    await service.sendNow(campaignId); // DRAFT → DISPATCHING: the claim and its message
    return claimMessage(db, 'line_broadcast_rich_message', 'campaignId', campaignId);
  },
  release: async (db, _handler, payload) => {
    await campaignService(db).pause(String(payload.campaignId), 'fenced-handler contract');
  },
  // Broadcasts LINE accepted under the claim's key (a 409 for a repeated key is no second effect).
  effects: async (_db, payload) => {
    const key = lineRetryKey(String(payload.campaignId), payload.epoch, 0);
    return line!.simulator
      .stats(line!.world.channelId)
      .requests.filter((r) => r.retryKey === key && r.status === 200).length;
  },
};

const ACTION_SETTINGS = {
  batchSize: 500,
  staleMs: 300_000,
  heartbeatMs: 60_000,
  maxRetries: 3,
  retryBaseMs: 5_000,
  retryMaxMs: 300_000,
  signalLookbackMs: 86_400_000,
  dispatch: 'queue' as const,
  concurrency: 1,
};

const action: FencedHandlerFixture = {
  database,
  definition: () => actionFire(defaultActionPorts, ACTION_SETTINGS),
  async claim(db, handler) {
    const service = new ScheduledActionService({ db, handler, settings: ACTION_SETTINGS });
    // Due at once with queue dispatch: claimed in the scheduling transaction, its fire message written.
    const { actionId } = await service.schedule({
      organizationId: 'org-contract',
      mode: 'normal',
      actionType: 'send_message',
      actionConfig: { text: 'hello' },
      delaySeconds: 0,
    });
    return claimMessage(db, 'scheduled_action_fire', 'actionId', actionId);
  },
  async release(_db, handler, payload) {
    const actionId = String(payload.actionId);
    await handler.for(scheduledActionAggregate).handle(actionId, (now) => ({
      type: 'RetryAction',
      actionId,
      epoch: payload.epoch,
      error: 'released by the fenced-handler contract',
      delayMs: 60_000,
      now,
    }));
  },
  effects: (db, payload) =>
    count(
      db,
      `select count(*)::int as n from outbox where destination = 'action_execute' and payload->>'actionId' = $1`,
      payload.actionId,
    ),
};

let target: TestHttpServer | undefined;
const run: FencedHandlerFixture = {
  database: async () => {
    const base = await database();
    target = await startHttpServer();
    return {
      db: base.db,
      close: async () => {
        await target?.close();
        await base.close();
      },
    };
  },
  definition: (handler) =>
    runExecution({
      handler,
      logger: testLogger(),
      executor: cronExecutor({
        http: new UndiciHttpClient({ allowPrivateTargets: true, allowedHosts: [] }),
        outputMaxBytes: 2_048,
      }),
      maxTimeoutMs: 30_000,
    }),
  async claim(db) {
    const cron = cronService(db);
    const job = await cron.create({
      organizationId: 'org-contract',
      name: `contract-${Date.now()}-${Math.random()}`,
      schedule: '0 0 1 1 *',
      timezone: 'UTC',
      jobType: 'ping',
      payload: { url: `${target!.url}/contract` },
    });
    const { runId } = await cron.trigger(job.jobId, 'fenced-handler contract');
    return claimMessage(db, 'cron_events', 'runId', runId);
  },
  async release(_db, handler, payload) {
    const runId = String(payload.runId);
    await handler.for(jobRunAggregate).handle(runId, (now) => ({
      type: 'CancelRun',
      runId,
      epoch: payload.epoch,
      reason: 'released by the fenced-handler contract',
      now,
    }));
  },
};

/** Every claimed aggregate of Herald's registry → its fixture. */
const FIXTURES: Record<string, FencedHandlerFixture> = {
  campaign,
  scheduled_action: action,
  job_run: run,
};

describe('fenced-handler contract coverage', () => {
  it('every claimed aggregate of the registry has a fixture', () => {
    const claimed = heraldRegistry.modules
      .flatMap((m) => m.aggregates)
      .filter((a) => a.claim)
      .map((a) => a.streamType);
    expect(claimed.sort()).toEqual(Object.keys(FIXTURES).sort());
  });
});

for (const [streamType, fixture] of Object.entries(FIXTURES))
  describeFencedHandlerContract(streamType, fixture);
