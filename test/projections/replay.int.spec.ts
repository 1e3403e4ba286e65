/**
 * `herald replay` and the point-in-time sandbox on real PostgreSQL: the state at a past time, the
 * causal chain of a claim through its publish receipt and inbox record (after the outbox row was
 * pruned), the sandbox schema equal to `replay --at`, and the JSON Lines export. The CLI is run for real.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lineMessagingApi } from '../../src/adapters/line/messaging-api.js';
import { campaignFromRow } from '../../src/adapters/postgres/campaign-queries.js';
import { claimInbox } from '../../src/adapters/postgres/inbox-queries.js';
import { claimOutboxForPublish, markSent, pruneSent } from '../../src/adapters/postgres/outbox-queries.js';
import type { LineDispatchPayload } from '../../src/aggregates/campaign/descriptor.js';
import { lineDeliveryHandler } from '../../src/aggregates/campaign/line/delivery.js';
import { LineRateLimiter } from '../../src/aggregates/campaign/line/rate-limit.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { LINE_DELIVERY_CONSUMER } from '../../src/aggregates/campaign/topology.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { exportJsonLines } from '../../src/projections/export.js';
import { replayStream, stateAt } from '../../src/projections/replay.js';
import { buildSandbox } from '../../src/projections/sandbox.js';
import { campaignService, dbTimePlus, lineCampaign } from '../support/campaigns.js';
import { herald } from '../support/cli.js';
import { type LineWorld, lineWorld, startTestLineSimulator, testLineSettings } from '../support/line.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let simulator: LineSimulator;
let world: LineWorld;
beforeAll(async () => {
  t = await createTestDatabase();
  simulator = await startTestLineSimulator();
  world = await lineWorld(t.db, simulator, testLineSettings(simulator));
});
afterAll(async () => {
  await simulator?.close();
  await t?.drop();
});

async function dbNow(): Promise<string> {
  const { rows } = await t.db.query<{ now: string }>(
    `select to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as now`,
  );
  return rows[0]!.now;
}

/** The relay's statements for every pending row (no broker needed to produce a sent receipt). */
async function relayAll() {
  const rows = await claimOutboxForPublish(t.db, {
    limit: 100,
    lockSeconds: 30,
    owner: 'test-relay',
    sinks: ['amqp'],
  });
  await markSent(
    t.db,
    rows.map((r) => ({ id: r.id, attempts: r.attempts, brokerRef: null })),
  );
  return rows;
}

describe('replay', () => {
  it('--at shows the state before a later event (library and CLI)', async () => {
    const service = campaignService(t.db);
    const before = await dbNow();
    const c = await service.create(lineCampaign(), { actor: 'ops', correlationId: 'create-1' });
    await service.schedule(c.campaignId, await dbTimePlus(t.db, 3_600_000));
    const at = await dbNow();
    await service.pause(c.campaignId);
    const ref = { streamType: 'campaign', streamId: c.campaignId };

    const then = await stateAt(t.db, heraldRegistry, ref, at);
    expect(then).toMatchObject({ version: 2, lastEvent: { type: 'CampaignScheduled' } });
    expect((then.state as { status: string }).status).toBe('SCHEDULED');
    expect(
      ((await stateAt(t.db, heraldRegistry, ref, await dbNow())).state as { status: string }).status,
    ).toBe('PAUSED');
    expect(await stateAt(t.db, heraldRegistry, ref, before)).toMatchObject({
      version: 0,
      state: { status: 'NONE' },
    });

    const cli = await herald(t, ['replay', `campaign/${c.campaignId}`, '--at', at, '--json']);
    expect(cli.code).toBe(0);
    const printed = JSON.parse(cli.stdout);
    expect(printed).toMatchObject({ version: 2, state: { status: 'SCHEDULED', campaignId: c.campaignId } });
    expect(printed.state).toEqual(then.state);

    const text = await herald(t, ['replay', `campaign/${c.campaignId}`, '--at', at]);
    expect(text.stdout).toMatch(/version 2, last event v2 CampaignScheduled/);
    expect(text.stdout).toMatch(/status\s+"SCHEDULED"/);
  });

  it('follows a claim to its publish receipt, inbox record and effect, after the outbox row was pruned', async () => {
    const service = campaignService(t.db);
    const c = await service.create(lineCampaign({ castType: 'broadcast' }));
    await service.activate(c.campaignId);
    await service.sendNow(c.campaignId, { actor: 'ops', correlationId: 'send-now-1' });
    const [row] = await relayAll();
    const deliver = lineDeliveryHandler({
      handler: new CommandHandler({ db: t.db }),
      logger: silentLogger,
      messaging: lineMessagingApi({ baseUrl: simulator.url, timeoutMs: 5_000 }),
      directory: world.directory,
      rateLimiter: new LineRateLimiter({ limits: testLineSettings(simulator).rateLimits }),
      settings: { maxThrottleWaitMs: 5_000 },
    });
    await t.db.transaction(async (tx) => {
      expect(
        await claimInbox(tx, { consumer: LINE_DELIVERY_CONSUMER, messageId: row!.messageId, attempt: 1 }),
      ).toBe(true);
      await deliver(
        {
          messageId: row!.messageId,
          payload: JSON.parse(row!.payloadText) as LineDispatchPayload,
          headers: row!.headers,
          attempt: 1,
          queue: row!.destination,
          redelivered: false,
          afterCommit: () => {},
          correlationId: 'send-now-1',
        },
        tx,
      );
    });
    expect(await pruneSent(t.db, { retentionHours: 0, limit: 100 })).toBeGreaterThan(0);

    const replay = await replayStream(t.db, heraldRegistry, {
      streamType: 'campaign',
      streamId: c.campaignId,
    });
    expect(replay.events.map((e) => e.type)).toEqual([
      'CampaignCreated',
      'CampaignActivated',
      'CampaignClaimed',
      'LineDeliveryPlanned',
      'LineChunkAccepted',
      'CampaignCompleted',
    ]);
    // The chain reaches LINE: the request id LINE gave the broadcast, and the retry key it went with.
    const [call] = simulator.stats(world.channelId).requests;
    expect(call).toMatchObject({ endpoint: 'broadcast', status: 200 });
    const claim = replay.commands.find(
      (command) => command.correlationId === 'send-now-1' && command.actor === 'ops',
    );
    expect(claim?.versions).toEqual([3]);
    expect(claim?.messages).toHaveLength(1);
    const [message] = claim!.messages;
    expect(message).toMatchObject({
      messageId: row!.messageId,
      destination: 'line_broadcast_rich_message',
      eventVersion: 3,
      outbox: null, // pruned: the receipt carries the chain on
      receipts: [{ outcome: 'sent', attempts: 1, messageId: row!.messageId }],
      inbox: [{ consumer: LINE_DELIVERY_CONSUMER, status: 'processed' }],
      effects: [
        { type: 'LineDeliveryPlanned', version: 4, actor: LINE_DELIVERY_CONSUMER },
        {
          type: 'LineChunkAccepted',
          version: 5,
          actor: LINE_DELIVERY_CONSUMER,
          externalRefs: { requestId: call!.requestId, retryKey: call!.retryKey },
        },
        { type: 'CampaignCompleted', version: 6, actor: LINE_DELIVERY_CONSUMER },
      ],
    });
    expect(replay.state).toMatchObject({ status: 'COMPLETED' });

    const cli = await herald(t, ['replay', `campaign/${c.campaignId}`, '--json']);
    expect(cli.code).toBe(0);
    const printed = JSON.parse(cli.stdout);
    const printedClaim = printed.commands.find(
      (command: { correlationId: string }) => command.correlationId === 'send-now-1',
    );
    expect(printedClaim.messages[0]).toMatchObject({
      messageId: row!.messageId,
      outbox: null,
      receipts: [{ outcome: 'sent' }],
      inbox: [{ consumer: 'line-delivery', status: 'processed' }],
    });
    const text = await herald(t, ['replay', `campaign/${c.campaignId}`]);
    expect(text.stdout).toContain(`message  ${row!.messageId} → amqp line_broadcast_rich_message`);
    expect(text.stdout).toMatch(/receipt {2}sent: confirmed/);
    expect(text.stdout).toMatch(/inbox {4}line-delivery: processed/);
    expect(text.stdout).toMatch(/effect {3}campaign\/\S+ v6 CampaignCompleted by line-delivery/);
    expect(text.stdout).toContain(`LineChunkAccepted by line-delivery`);
    expect(text.stdout).toMatch(
      new RegExp(`v5 LineChunkAccepted by line-delivery .*\\[.*requestId ${call!.requestId}`),
    );
    expect(text.stdout).toContain(`retryKey ${call!.retryKey}`);

    expect((await herald(t, ['replay', 'campaign'])).code).toBe(2);
    expect((await herald(t, ['replay', `campaign/${randomUUID()}`])).code).toBe(1);
  });

  it('the sandbox schema at T holds exactly the states replay --at T prints; live tables are untouched', async () => {
    const service = campaignService(t.db);
    const early = await service.create(lineCampaign({ name: 'early' }));
    await service.schedule(early.campaignId, await dbTimePlus(t.db, 3_600_000));
    const sent = await service.create(lineCampaign({ name: 'sent' }));
    await service.activate(sent.campaignId);
    await service.sendNow(sent.campaignId);
    const T = await dbNow();
    await service.pause(early.campaignId);
    await service.cancel(early.campaignId, 'changed our mind');
    const late = await service.create(lineCampaign({ name: 'created after T' }));
    const liveBefore = await t.db.query('select * from campaign order by id');

    const result = await buildSandbox(t.db, heraldRegistry, { until: T, into: 'sandbox_t' });
    const { rows } = await t.db.query<Parameters<typeof campaignFromRow>[0]>(
      'select * from sandbox_t.campaign',
    );
    const sandbox = new Map(rows.map((r) => [String(r.id), campaignFromRow(r)]));
    expect(result.tables[0]!.rows).toBe(sandbox.size);

    const { rows: ids } = await t.db.query<{ id: string }>('select id::text as id from campaign');
    let present = 0;
    for (const { id } of ids) {
      const at = await stateAt(t.db, heraldRegistry, { streamType: 'campaign', streamId: id }, T);
      if (at.version === 0) {
        expect(sandbox.has(id)).toBe(false);
        continue;
      }
      present++;
      expect(sandbox.get(id)).toEqual({ state: at.state, version: at.version });
    }
    expect(present).toBe(sandbox.size);
    expect(sandbox.has(late.campaignId)).toBe(false);
    expect(sandbox.get(early.campaignId)?.state.status).toBe('SCHEDULED');
    expect(sandbox.get(sent.campaignId)?.state.status).toBe('DISPATCHING');
    expect((await t.db.query('select * from campaign order by id')).rows).toEqual(liveBefore.rows);
    const { rows: views } = await t.db.query<{ n: number; after: number }>(
      `select count(*)::int as n, count(*) filter (where recorded_at > $1::timestamptz)::int as after from sandbox_t.event`,
      [T],
    );
    expect(views[0]!.n).toBeGreaterThan(0);
    expect(views[0]!.after).toBe(0);

    const cli = await herald(t, ['replay', '--until', T, '--into', 'sandbox_cli']);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain(`sandbox_cli.campaign: ${sandbox.size} rows`);
    const again = await herald(t, ['replay', '--until', T, '--into', 'sandbox_cli']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already exists/);
    expect((await herald(t, ['replay', '--until', 'yesterday', '--into', 'sandbox_x'])).code).toBe(2);
  });

  it('exports events and receipts as JSON Lines by time range and stream type', async () => {
    const service = campaignService(t.db);
    await relayAll(); // rows left by earlier tests: their receipts fall before the range
    const from = await dbNow();
    const c = await service.create(lineCampaign());
    await service.activate(c.campaignId);
    await service.sendNow(c.campaignId);
    await relayAll();
    const to = await dbNow();
    await service.create(lineCampaign({ name: 'after the range' }));

    const lines: string[] = [];
    const counts = await exportJsonLines(
      t.db,
      { from, to, streamTypes: ['campaign'], events: true, receipts: true, batchSize: 2 },
      (chunk) => {
        lines.push(...chunk.split('\n').filter(Boolean));
      },
    );
    const parsed = lines.map((line) => JSON.parse(line));
    expect(counts).toEqual({ events: 3, receipts: 1 });
    expect(parsed.map((p) => p.kind)).toEqual(['event', 'event', 'event', 'receipt']);
    expect(parsed.slice(0, 3).map((p) => [p.streamId, p.version, p.type])).toEqual([
      [c.campaignId, 1, 'CampaignCreated'],
      [c.campaignId, 2, 'CampaignActivated'],
      [c.campaignId, 3, 'CampaignClaimed'],
    ]);
    expect(parsed[3]).toMatchObject({
      outcome: 'sent',
      streamId: c.campaignId,
      destination: 'line_multicast_rich_message',
    });

    const cli = await herald(t, [
      'export',
      '--from',
      from,
      '--to',
      to,
      '--stream-type',
      'campaign',
      '--receipts',
    ]);
    expect(cli.code).toBe(0);
    expect(
      cli.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual(parsed);
    expect(cli.stderr).toContain('exported 3 events, 1 receipts');
  });
});
