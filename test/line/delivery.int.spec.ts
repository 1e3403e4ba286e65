/**
 * The LINE delivery handler (src/aggregates/campaign/line/delivery.ts) on real PostgreSQL, through the
 * production SDK adapter, against the LINE test server (which validates every request against LINE's
 * OpenAPI document and enforces the retry-key semantics). Each test hands the handler the claim's own
 * dispatch message inside a transaction, as the consumer toolkit does; the broker path is covered by the
 * end-to-end specs.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type LineCall,
  type LineMessagingPort,
  type LineOutcome,
  lineMessagingApi,
} from '../../src/adapters/line/messaging-api.js';
import {
  type LineDeliveryDirectory,
  lineDeliveryHandler,
} from '../../src/aggregates/campaign/line/delivery.js';
import { LineRateLimiter } from '../../src/aggregates/campaign/line/rate-limit.js';
import type { LineSettings } from '../../src/aggregates/campaign/line/settings.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { lineRetryKey } from '../../src/domain/campaign/line.js';
import type { ExistingCampaign } from '../../src/domain/campaign.js';
import { TransientError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { type Logger, silentLogger } from '../../src/logger.js';
import { waitFor } from '../../src/testing/wait.js';
import type { ConsumedMessage } from '../../src/worker/delivery-policy.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import {
  type LineWorld,
  lineUserId,
  lineWorld,
  startTestLineSimulator,
  testLineSettings,
} from '../support/line.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let simulator: LineSimulator;
let settings: LineSettings;
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
  settings = testLineSettings(simulator, { HERALD_LINE_MULTICAST_PER_SECOND: '1000' });
  world = await lineWorld(t.db, simulator, settings, { audiences: { 'aud-1': 1_234, 'aud-small': 10 } });
});
afterEach(async () => {
  await t?.drop();
});

/** A messaging port that runs the real call, then loses LINE's answer for the chunks `lose` names. */
function losingAnswers(port: LineMessagingPort, lose: (call: LineCall) => boolean): LineMessagingPort {
  const wrap =
    <C extends LineCall>(send: (call: C) => Promise<LineOutcome>) =>
    async (call: C): Promise<LineOutcome> => {
      const outcome = await send(call);
      if (lose(call))
        return { kind: 'transient', status: null, requestId: null, message: 'connection reset' };
      return outcome;
    };
  return {
    ...port,
    broadcast: wrap((c) => port.broadcast(c)),
    multicast: wrap((c) => port.multicast(c)),
    narrowcast: wrap((c) => port.narrowcast(c)),
  };
}

function deliveryHandler(
  options: {
    messaging?: LineMessagingPort;
    directory?: LineDeliveryDirectory;
    chunksPerRead?: number;
    limits?: Partial<LineSettings['rateLimits']>;
    logger?: Logger;
    /** An injected clock for the rate limiter and the throttle waits (sleeping advances it). */
    clock?: { now: () => number; sleep: (ms: number) => Promise<void> };
    maxThrottleWaitMs?: number;
  } = {},
) {
  return lineDeliveryHandler({
    handler: new CommandHandler({ db: t.db }),
    logger: options.logger ?? silentLogger,
    messaging: options.messaging ?? lineMessagingApi({ baseUrl: simulator.url, timeoutMs: 2_000 }),
    directory: options.directory ?? world.directory,
    rateLimiter: new LineRateLimiter({
      limits: { ...settings.rateLimits, ...options.limits },
      ...(options.clock ?? {}),
    }),
    settings: { maxThrottleWaitMs: options.maxThrottleWaitMs ?? 5_000 },
    heartbeatMs: 60_000,
    ...(options.clock ? { sleep: options.clock.sleep } : {}),
    ...(options.chunksPerRead ? { chunksPerRead: options.chunksPerRead } : {}),
  });
}

/** The campaign's live claim message, as the relay published it. */
async function claimMessage(campaignId: string): Promise<ConsumedMessage<never>> {
  const { rows } = await t.db.query<{ message_id: string; payload: never }>(
    `select o.message_id, o.payload from outbox o join event e on e.position = o.event_position
      where e.stream_id = $1 order by o.id desc limit 1`,
    [campaignId],
  );
  const row = rows[0]!;
  return {
    messageId: row.message_id,
    payload: row.payload,
    headers: {},
    attempt: 1,
    queue: 'line_multicast_rich_message',
    redelivered: false,
    afterCommit: () => {},
  };
}

/** One delivery attempt, as the consumer toolkit runs it: the handler in a transaction. */
async function deliver(handle: ReturnType<typeof deliveryHandler>, campaignId: string) {
  const message = await claimMessage(campaignId);
  return t.db.transaction((tx) => handle(message, tx));
}

async function dispatching(overrides: Record<string, unknown> = {}): Promise<ExistingCampaign> {
  const service = campaignService(t.db);
  const c = await service.create(
    lineCampaign({
      audienceId: 'aud-1',
      line: { messages: [{ type: 'text', text: 'Hello' }] },
      ...overrides,
    }),
  );
  return service.sendNow(c.campaignId);
}

const get = (id: string) => campaignService(t.db).get(id);
const eventsOf = async (id: string) => campaignService(t.db).history(id);

describe('LINE delivery', () => {
  it('a multicast goes to LINE in chunks of 500 with planned retry keys, each recipient once, every request valid', async () => {
    const c = await dispatching();
    await deliver(deliveryHandler(), c.campaignId);

    const done = await get(c.campaignId);
    expect(done.status).toBe('COMPLETED');
    expect(done.line?.plan).toMatchObject({ epoch: 1, chunks: 3, recipients: 1_234 });
    expect(done.line?.progress).toMatchObject({
      chunksAccepted: 3,
      recipientsAccepted: 1_234,
      duplicates: 0,
    });
    const stats = simulator.stats(world.channelId);
    expect(stats.accepted).toBe(3);
    expect(stats.distinctRecipients).toBe(1_234);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    expect(simulator.timesReceived(world.channelId, lineUserId(0))).toBe(1);
    expect(simulator.timesReceived(world.channelId, lineUserId(1_233))).toBe(1);
    expect(simulator.violationCount).toBe(0);
    // Each chunk's event carries the key it was sent with and LINE's request id, as the server recorded.
    const accepted = (await eventsOf(c.campaignId)).filter((e) => e.type === 'LineChunkAccepted');
    expect(accepted.map((e) => (e.data as { retryKey: string }).retryKey)).toEqual(
      [0, 1, 2].map((k) => lineRetryKey(c.campaignId, 1, k)),
    );
    expect(accepted.map((e) => (e.data as { recipients: number }).recipients)).toEqual([500, 500, 234]);
    expect(accepted.map((e) => (e.data as { requestId: string }).requestId)).toEqual(
      stats.requests.map((r) => r.requestId),
    );
  });

  describe.each([
    {
      chunksPerRead: 1,
      // Chunk k + 1's ids are read while chunk k is in flight (before its answer), each once.
      order: [
        'read 0 (500)',
        'read 1 (500)',
        'send 0',
        'answer 0',
        'read 2 (500)',
        'send 1',
        'answer 1',
        'send 2',
        'answer 2',
      ],
    },
    {
      chunksPerRead: 2,
      order: [
        'read 0 (1000)',
        'send 0',
        'answer 0',
        'read 1 (500)',
        'send 1',
        'answer 1',
        'send 2',
        'answer 2',
      ],
    },
    {
      // The default: one read for up to ten chunks.
      chunksPerRead: undefined,
      order: ['read 0 (1500)', 'send 0', 'answer 0', 'send 1', 'answer 1', 'send 2', 'answer 2'],
    },
  ])('audience ids read $chunksPerRead chunk(s) at a time', ({ chunksPerRead, order: expected }) => {
    it('the next chunks’ ids are read ahead while a chunk is in flight; each chunk is sent only once the one before is recorded', async () => {
      const c = await dispatching();
      const order: string[] = [];
      const recordedAtSend: number[] = [];
      let reads = 0;
      const directory: LineDeliveryDirectory = {
        tokenFor: (lineOaId) => world.directory.tokenFor(lineOaId),
        invalidateToken: (lineOaId) => world.directory.invalidateToken(lineOaId),
        sealedAudienceSize: (audienceId, organizationId) =>
          world.directory.sealedAudienceSize(audienceId, organizationId),
        membersPage: (audienceId, after, limit) => {
          order.push(`read ${reads++} (${limit})`);
          return world.directory.membersPage(audienceId, after, limit);
        },
      };
      const api = lineMessagingApi({ baseUrl: simulator.url });
      const chunkOf = (retryKey: string) =>
        [0, 1, 2].find((k) => lineRetryKey(c.campaignId, 1, k) === retryKey)!;
      const messaging: LineMessagingPort = {
        ...api,
        multicast: async (call) => {
          const k = chunkOf(call.retryKey);
          order.push(`send ${k}`);
          recordedAtSend.push((await get(c.campaignId)).line!.progress.chunksDone);
          const outcome = await api.multicast(call);
          order.push(`answer ${k}`);
          return outcome;
        },
      };
      await deliver(
        deliveryHandler({ messaging, directory, ...(chunksPerRead ? { chunksPerRead } : {}) }),
        c.campaignId,
      );

      const done = await get(c.campaignId);
      expect(done.status).toBe('COMPLETED');
      expect(order).toEqual(expected);
      // Chunk k goes only once chunks 0 … k − 1 are recorded.
      expect(recordedAtSend).toEqual([0, 1, 2]);
      // The chunks are the plan's however the ids were read: 500, 500, 234 after each recorded cursor.
      const chunks = (await eventsOf(c.campaignId))
        .filter((e) => e.type === 'LineChunkAccepted')
        .map((e) => e.data as { recipients: number; cursor: string });
      expect(chunks.map((d) => [d.recipients, d.cursor])).toEqual([
        [500, lineUserId(499)],
        [500, lineUserId(999)],
        [234, lineUserId(1_233)],
      ]);
      const stats = simulator.stats(world.channelId);
      expect(stats.distinctRecipients).toBe(1_234);
      expect(stats.usersReceivedMoreThanOnce).toBe(0);
    });
  });

  it('a broadcast and a narrowcast are one call each', async () => {
    const b = await dispatching({ castType: 'broadcast', audienceId: null });
    await deliver(deliveryHandler(), b.campaignId);
    const n = await dispatching({ castType: 'narrowcast', audienceId: '4242' });
    await deliver(deliveryHandler(), n.campaignId);
    expect((await get(b.campaignId)).status).toBe('COMPLETED');
    expect((await get(n.campaignId)).status).toBe('COMPLETED');
    const stats = simulator.stats(world.channelId);
    expect(stats.requests.map((r) => [r.endpoint, r.status])).toEqual([
      ['broadcast', 200],
      ['narrowcast', 202],
    ]);
    expect(stats.narrowcastAudiences).toEqual([4242]);
    expect(simulator.violationCount).toBe(0);
  });

  it("LINE's answer lost after it accepted a chunk: the redelivery re-sends it with the same key, LINE answers 409, each recipient once", async () => {
    const c = await dispatching();
    const chunk1 = lineRetryKey(c.campaignId, 1, 1);
    const lossy = losingAnswers(
      lineMessagingApi({ baseUrl: simulator.url }),
      (call) => call.retryKey === chunk1,
    );
    await expect(deliver(deliveryHandler({ messaging: lossy }), c.campaignId)).rejects.toBeInstanceOf(
      TransientError,
    );
    const midway = await get(c.campaignId);
    expect(midway.status).toBe('DISPATCHING');
    expect(midway.line?.progress.chunksDone).toBe(1); // chunk 0 recorded, chunk 1 accepted by LINE but not here

    await deliver(deliveryHandler(), c.campaignId);
    const done = await get(c.campaignId);
    expect(done.status).toBe('COMPLETED');
    expect(done.line?.progress).toMatchObject({
      chunksAccepted: 3,
      duplicates: 1,
      recipientsAccepted: 1_234,
    });
    const stats = simulator.stats(world.channelId);
    expect(stats.duplicates).toBe(1);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    expect(stats.distinctRecipients).toBe(1_234);
    const first = stats.requests.find((r) => r.retryKey === chunk1 && r.status === 200)!;
    const replay = stats.requests.find((r) => r.retryKey === chunk1 && r.status === 409)!;
    expect(replay.acceptedRequestId).toBe(first.requestId);
    const duplicate = (await eventsOf(c.campaignId)).find(
      (e) => e.type === 'LineChunkAccepted' && (e.data as { chunk: number }).chunk === 1,
    );
    expect(duplicate?.data).toMatchObject({ acceptedRequestId: first.requestId, retryKey: chunk1 });
  });

  it('a reclaim under the next epoch resumes with the plan’s keys: chunks LINE accepted are answered 409, never sent twice', async () => {
    const c = await dispatching();
    const chunk0 = lineRetryKey(c.campaignId, 1, 0);
    // LINE accepts chunk 0 but the worker dies before recording it.
    const lossy = losingAnswers(
      lineMessagingApi({ baseUrl: simulator.url }),
      (call) => call.retryKey === chunk0,
    );
    await expect(deliver(deliveryHandler({ messaging: lossy }), c.campaignId)).rejects.toBeInstanceOf(
      TransientError,
    );
    const service = campaignService(t.db);
    // The reaper's reclaim, once the database's clock has moved past the (1 ms) stale window.
    await waitFor(
      () =>
        service
          .execute(c.campaignId, (now) => ({
            type: 'ReclaimCampaign',
            campaignId: c.campaignId,
            now,
            staleAfterMs: 1,
          }))
          .then(
            () => true,
            () => false,
          ),
      { what: 'the claim reclaimed' },
    );
    await service.execute(c.campaignId, (now) => ({ type: 'ClaimCampaign', campaignId: c.campaignId, now }));
    const reclaimed = await get(c.campaignId);
    expect(reclaimed.claimEpoch).toBe(3);

    await deliver(deliveryHandler(), c.campaignId);
    const done = await get(c.campaignId);
    expect(done.status).toBe('COMPLETED');
    expect(done.line?.plan?.epoch).toBe(1);
    const stats = simulator.stats(world.channelId);
    expect(stats.requests.filter((r) => r.retryKey === chunk0).map((r) => r.status)).toEqual([200, 409]);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    expect(stats.distinctRecipients).toBe(1_234);
  });

  it('400 fails the campaign with LINE’s message and details, without a retry', async () => {
    const c = await dispatching({ audienceId: 'aud-small' });
    simulator.behave(world.channelId, {
      kind: 'reject',
      status: 400,
      message: 'The request body has 1 error(s)',
      details: [{ message: 'May not be empty', property: 'messages[0].text' }],
    });
    await deliver(deliveryHandler(), c.campaignId);
    const failed = await get(c.campaignId);
    expect(failed.status).toBe('FAILED');
    expect(failed.failureReason).toContain('The request body has 1 error(s)');
    expect(failed.failureReason).toContain('messages[0].text: May not be empty');
    expect(simulator.stats(world.channelId).requestCount).toBe(1);
    const call = (await eventsOf(c.campaignId)).find((e) => e.type === 'LineCallFailed');
    expect(call?.data).toMatchObject({ kind: 'rejected', status: 400 });
  });

  it('401 is retried once with a fresh token, then fails the campaign', async () => {
    const c = await dispatching({ audienceId: 'aud-small' });
    simulator.behave(world.channelId, { kind: 'unauthorized' });
    await deliver(deliveryHandler(), c.campaignId);
    const failed = await get(c.campaignId);
    expect(failed.status).toBe('FAILED');
    expect(failed.failureReason).toMatch(/LINE refused chunk 0 \(401\)/);
    expect(simulator.stats(world.channelId).requestCount).toBe(2);
  });

  it('a monthly quota refusal fails the campaign with its own reason', async () => {
    const c = await dispatching({ audienceId: 'aud-small' });
    simulator.behave(world.channelId, { kind: 'quota-exhausted' });
    await deliver(deliveryHandler(), c.campaignId);
    const failed = await get(c.campaignId);
    expect(failed.status).toBe('FAILED');
    expect(failed.failureReason).toMatch(/^LINE monthly message quota reached at chunk 0/);
  });

  it('500 goes back to the retry queue (a TransientError) and the next attempt delivers once', async () => {
    const c = await dispatching({ audienceId: 'aud-small' });
    simulator.behave(world.channelId, { kind: 'server-error', status: 500, calls: 1 });
    await expect(deliver(deliveryHandler(), c.campaignId)).rejects.toBeInstanceOf(TransientError);
    expect((await get(c.campaignId)).status).toBe('DISPATCHING');
    await deliver(deliveryHandler(), c.campaignId);
    expect((await get(c.campaignId)).status).toBe('COMPLETED');
    const stats = simulator.stats(world.channelId);
    expect(stats.requests.map((r) => r.status)).toEqual([500, 200]);
    expect(stats.distinctRecipients).toBe(10);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
  });

  it('429 waits for Retry-After and sends the same chunk with the same key; the channel’s rate holds', async () => {
    const c = await dispatching();
    simulator.behave(world.channelId, { kind: 'throttle', retryAfterSeconds: 1, calls: 2 });
    await deliver(deliveryHandler({ limits: { multicastPerSecond: 2 } }), c.campaignId);
    expect((await get(c.campaignId)).status).toBe('COMPLETED');
    const stats = simulator.stats(world.channelId);
    const chunk0 = lineRetryKey(c.campaignId, 1, 0);
    expect(stats.requests.filter((r) => r.retryKey === chunk0).map((r) => r.status)).toEqual([429, 429, 200]);
    expect(stats.maxObservedRate.multicast).toBeLessThanOrEqual(2);
    expect(stats.distinctRecipients).toBe(1_234);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
  });

  it('an OA without credentials fails the delivery permanently with a clear reason', async () => {
    const c = await dispatching({ lineOaId: 'oa-unknown', audienceId: 'aud-small' });
    await deliver(deliveryHandler(), c.campaignId);
    const failed = await get(c.campaignId);
    expect(failed.status).toBe('FAILED');
    expect(failed.failureReason).toMatch(/oa-unknown/);
    expect(simulator.stats().violationCount).toBe(0);
  });

  it('a claim revoked mid-delivery stops the delivery: the pause wins, nothing more is sent', async () => {
    const c = await dispatching();
    const service = campaignService(t.db);
    let paused = false;
    const pausing: LineMessagingPort = {
      ...lineMessagingApi({ baseUrl: simulator.url }),
      multicast: async (call) => {
        const outcome = await lineMessagingApi({ baseUrl: simulator.url }).multicast(call);
        if (!paused) {
          paused = true;
          await service.pause(c.campaignId, 'operator');
        }
        return outcome;
      },
    };
    await deliver(deliveryHandler({ messaging: pausing }), c.campaignId);
    const state = await get(c.campaignId);
    expect(state.status).toBe('PAUSED');
    expect(simulator.stats(world.channelId).accepted).toBe(1);
  });
});

describe('LINE delivery: storms, secrets, edits and resends', () => {
  it('a 30 s storm of 429s: no call beyond the channel’s rate, nothing dropped, every member once afterwards', async () => {
    // The storm runs on an injected clock shared by the LINE test server, the rate limiter and the
    // throttle waits: 30 s of refusals pass in a moment, and the server's rate windows see the same time.
    let now = Date.now();
    const clock = {
      now: () => now,
      sleep: async (ms: number) => {
        now += ms;
      },
    };
    const storm = await startTestLineSimulator({ now: clock.now });
    try {
      storm.addChannel({ channelId: world.channelId, tokens: [world.token], rateLimits: { multicast: 10 } });
      const c = await dispatching();
      storm.behave(world.channelId, { kind: 'throttle', forMs: 30_000 });
      await deliver(
        deliveryHandler({
          messaging: lineMessagingApi({ baseUrl: storm.url, timeoutMs: 2_000 }),
          limits: { multicastPerSecond: 10 },
          clock,
          maxThrottleWaitMs: 60_000,
        }),
        c.campaignId,
      );
      expect((await get(c.campaignId)).status).toBe('COMPLETED');
      const stats = storm.stats(world.channelId);
      const refused = stats.requests.filter((r) => r.status === 429);
      expect(refused.length).toBeGreaterThanOrEqual(4); // 1 + 2 + 4 + 8 + 16 s of backoff cover the storm
      expect(refused.every((r) => r.retryKey === lineRetryKey(c.campaignId, 1, 0))).toBe(true);
      expect(Math.max(...refused.map((r) => r.receivedAt))).toBeLessThan(
        stats.requests[0]!.receivedAt + 30_000,
      );
      expect(stats.maxObservedRate.multicast).toBeLessThanOrEqual(10);
      expect(stats.accepted).toBe(3);
      expect(stats.distinctRecipients).toBe(1_234);
      expect(stats.usersReceivedMoreThanOnce).toBe(0);
      expect(storm.violationCount).toBe(0);
      const throttled = (await eventsOf(c.campaignId)).filter(
        (e) => e.type === 'LineCallFailed' && (e.data as { kind: string }).kind === 'throttled',
      );
      expect(throttled).toHaveLength(refused.length);
    } finally {
      await storm.close();
    }
  });

  it('a channel whose next slot is beyond the throttle cap gives the message back, sending nothing, instead of holding its transaction', async () => {
    let now = Date.now();
    const clock = {
      now: () => now,
      sleep: async (ms: number) => {
        now += ms;
      },
    };
    // LINE's 60 broadcasts per hour: one slot a minute; the throttle cap is 5 s.
    const handle = deliveryHandler({ clock, limits: { broadcastPerHour: 60 }, maxThrottleWaitMs: 5_000 });
    const first = await dispatching({ castType: 'broadcast', audienceId: null, name: 'first' });
    const second = await dispatching({ castType: 'broadcast', audienceId: null, name: 'second' });
    await deliver(handle, first.campaignId);
    await expect(deliver(handle, second.campaignId)).rejects.toThrow(
      /rate leaves no slot for chunk 0 within 5000 ms/,
    );
    expect((await get(second.campaignId)).status).toBe('DISPATCHING');
    expect(simulator.stats(world.channelId).requestCount).toBe(1);
    now += 60_000; // the retry queue hands the message back a minute later
    await deliver(handle, second.campaignId);
    expect((await get(second.campaignId)).status).toBe('COMPLETED');
    expect(simulator.stats(world.channelId).requests.map((r) => r.status)).toEqual([200, 200]);
  });

  it('the channel access token appears in no log line and no event, whatever LINE answers', async () => {
    const lines: string[] = [];
    const capture = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = pino({ level: 'trace' }, capture);
    const c = await dispatching({ audienceId: 'aud-small' });
    simulator.behave(world.channelId, { kind: 'server-error', status: 503, calls: 1 });
    await expect(deliver(deliveryHandler({ logger }), c.campaignId)).rejects.toBeInstanceOf(TransientError);
    simulator.behave(world.channelId, { kind: 'unauthorized', calls: 1 });
    await deliver(deliveryHandler({ logger }), c.campaignId);
    expect((await get(c.campaignId)).status).toBe('COMPLETED');
    const refused = await dispatching({ audienceId: 'aud-small', name: 'refused' });
    simulator.behave(world.channelId, { kind: 'reject', status: 400, message: `bad token ${world.token}?` });
    await deliver(deliveryHandler({ logger }), refused.campaignId);

    expect(lines.some((line) => line.includes('LINE chunk accepted'))).toBe(true);
    expect(lines.some((line) => line.includes('effect failed permanently'))).toBe(true);
    expect(lines.filter((line) => line.includes(world.token))).toEqual([]);
    const { rows } = await t.db.query<{ n: number }>(
      `select count(*)::int as n from event where data::text like '%' || $1 || '%' or meta::text like '%' || $1 || '%'`,
      [world.token],
    );
    expect(rows[0]!.n).toBe(0);
    // The token LINE echoed in its message is redacted before it is recorded as the reason.
    expect((await get(refused.campaignId)).failureReason).not.toContain(world.token);
  });

  it('an edited campaign sends its edited content: what LINE receives is the last edit', async () => {
    const service = campaignService(t.db);
    const received: unknown[][] = [];
    simulator.beforeRespond((call) => void received.push([...call.messages]));
    try {
      const c = await service.create(lineCampaign({ audienceId: 'aud-small' }));
      await service.schedule(c.campaignId, new Date(Date.now() + 3_600_000));
      const edited = [
        { type: 'text' as const, text: 'Edited: 30% off today' },
        { type: 'sticker' as const, packageId: '446', stickerId: '1988' },
      ];
      await service.edit(c.campaignId, { messages: edited, name: 'edited' });
      await service.sendNow(c.campaignId);
      await deliver(deliveryHandler(), c.campaignId);
      expect((await get(c.campaignId)).status).toBe('COMPLETED');
      expect(received).toEqual([edited]);
      expect(simulator.violationCount).toBe(0);
    } finally {
      simulator.beforeRespond(null);
    }
  });

  it('a FAILED campaign resent resumes its plan: accepted chunks are not sent again, the refused one goes under its key', async () => {
    const service = campaignService(t.db);
    const c = await dispatching();
    // LINE accepts chunk 0, then refuses the next call (chunk 1) with a 400.
    simulator.beforeRespond((call) => {
      if (call.retryKey === lineRetryKey(c.campaignId, 1, 0)) {
        simulator.behave(world.channelId, {
          kind: 'reject',
          status: 400,
          message: 'Invalid reply token',
          calls: 1,
        });
      }
    });
    try {
      await deliver(deliveryHandler(), c.campaignId);
    } finally {
      simulator.beforeRespond(null);
    }
    const failed = await get(c.campaignId);
    expect(failed.status).toBe('FAILED');
    expect(failed.line?.progress).toMatchObject({ chunksDone: 1, recipientsAccepted: 500 });

    await service.resend(c.campaignId, 'LINE fixed on their side');
    const resent = await service.sendNow(c.campaignId);
    expect(resent.claimEpoch).toBe(2);
    await deliver(deliveryHandler(), c.campaignId);
    const done = await get(c.campaignId);
    expect(done.status).toBe('COMPLETED');
    expect(done.line?.progress).toMatchObject({
      chunksAccepted: 3,
      recipientsAccepted: 1_234,
      duplicates: 0,
    });
    const stats = simulator.stats(world.channelId);
    expect(stats.requests.map((r) => [r.retryKey, r.status])).toEqual([
      [lineRetryKey(c.campaignId, 1, 0), 200],
      [lineRetryKey(c.campaignId, 1, 1), 400],
      [lineRetryKey(c.campaignId, 1, 1), 200],
      [lineRetryKey(c.campaignId, 1, 2), 200],
    ]);
    expect(stats.distinctRecipients).toBe(1_234);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    // A plan that is done has nothing left to resend.
    await expect(service.resend(c.campaignId)).rejects.toThrow(/status COMPLETED/);
  });
});
