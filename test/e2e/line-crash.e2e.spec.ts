/**
 * ADR 0021's once-only window under real crashes: `herald relay`, `herald scanner` and `herald worker` as
 * child processes, LINE the LINE test server over HTTP (in this process: it validates every request
 * against LINE's OpenAPI document, enforces retry keys — 409 with `x-line-accepted-request-id` — and
 * counts every recipient's receipts). The worker is SIGKILLed from the server's `beforeRespond` hook, i.e.
 * after LINE accepted a chunk and before the worker could read the answer and record it:
 *
 * - a new worker takes the redelivered message and sends the chunk again under the same key: 409, the
 *   campaign completes, each recipient counted once;
 * - the same through the reaper: no worker for a while, the claim goes stale and its message is presumed
 *   lost, the scanner reclaims it under a new epoch, and the new epoch's delivery reuses the plan's keys;
 * - a 200,000-member multicast (400 chunks) whose worker is killed five times at random points (in the
 *   in-doubt window, or a few ms after an answer): every member once at LINE, and the campaign's progress
 *   (its state, `herald campaigns show`, `GET /v1/campaigns/:id`) equal to LINE's own counts.
 *
 * Seed queue names: serial project. HERALD_TEST_SEED=<n> replays the kill points of a failed run.
 */
import { randomInt } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { HERALD_QUEUES, LINE_MULTICAST_QUEUE, LINE_QUEUES } from '../../src/aggregates/campaign/topology.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { createApiKey } from '../../src/api/auth.js';
import { lineRetryKey } from '../../src/domain/campaign/line.js';
import { startApi } from '../../src/roles/api-role.js';
import { createRuntime } from '../../src/roles/runtime.js';
import { waitFor } from '../../src/testing/wait.js';
import { request } from '../api/support/api.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { herald, type RunningHerald, spawnHerald } from '../support/cli.js';
import {
  lineAcceptancesPerChunk,
  lineEnv,
  lineUserId,
  lineWorld,
  plannedLineKeys,
  startTestLineSimulator,
  TEST_LINE_CONTENT,
  testLineSettings,
} from '../support/line.js';
import { testLogger } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let simulator: LineSimulator;
let relay: RunningHerald;
/** Processes a test started, stopped after it (a killed one is already gone). */
const started: RunningHerald[] = [];
const cleanups: (() => Promise<void>)[] = [];

/** What every role process gets (nothing is inherited but PATH and HOME). */
function roleEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: t.url,
    HERALD_SCHEMA: t.schema,
    AMQP_URL: requireEnv('AMQP_URL'),
    // The worker also runs the SMS delivery-report consumers (Kafka).
    KAFKA_BROKERS: requireEnv('KAFKA_BROKERS'),
    HERALD_LOG_LEVEL: process.env.HERALD_TEST_LOG ?? 'warn',
    HERALD_METRICS_HOST: '127.0.0.1',
    HERALD_METRICS_PORT: '0',
    HERALD_RELAY_IDLE_POLL_MS: '100',
    HERALD_CONSUMER_RETRY_DELAY_MS: '200',
    ...lineEnv(simulator, { HERALD_LINE_MULTICAST_PER_SECOND: '100000' }),
    ...extra,
  };
}

function spawnRole(role: string, env: Record<string, string>): RunningHerald {
  const child = spawnHerald([role], env);
  started.push(child);
  return child;
}

const gone = (child: RunningHerald) => child.process.exitCode !== null || child.process.signalCode !== null;

/** `herald worker` processes, each its own pod (HERALD_POD): started, and SIGKILLed, by the test. */
class Workers {
  kills = 0;
  private readonly all: RunningHerald[] = [];
  private readonly pods = new Map<string, RunningHerald>();

  constructor(private readonly env: Record<string, string>) {}

  start(): RunningHerald {
    const pod = `worker-${this.all.length + 1}`;
    const worker = spawnRole('worker', { ...this.env, HERALD_POD: pod });
    this.all.push(worker);
    this.pods.set(pod, worker);
    return worker;
  }

  /** The worker whose pod recorded the campaign's latest event: the one delivering it. */
  async delivering(campaignId: string): Promise<RunningHerald> {
    const { rows } = await t.db.query<{ pod: string }>(
      `select meta ->> 'pod' as pod from event where stream_type = 'campaign' and stream_id = $1
        order by version desc limit 1`,
      [campaignId],
    );
    const worker = this.pods.get(rows[0]?.pod ?? '');
    if (!worker) throw new Error(`no worker of pod ${rows[0]?.pod} delivers ${campaignId}`);
    return worker;
  }

  /** SIGKILL (no shutdown of any kind): resolves once the process is gone. */
  async kill(worker: RunningHerald): Promise<void> {
    if (gone(worker)) return;
    worker.process.kill('SIGKILL');
    await worker.exited();
    this.kills++;
  }

  output(): string {
    return this.all.map((w, i) => `--- worker-${i + 1} ---\n${w.output()}`).join('\n');
  }
}

/** `waiting`, its failure followed by the processes' output (read when it fails). */
async function explained<T>(waiting: Promise<T>, output: () => string): Promise<T> {
  try {
    return await waiting;
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${output().slice(-30_000)}`);
  }
}

/** Consumers on the LINE multicast queue (each running worker has one). */
async function multicastConsumers(): Promise<number> {
  const connection = await amqp.connect(requireEnv('AMQP_URL'));
  try {
    const channel = await connection.createChannel();
    return (await channel.checkQueue(LINE_MULTICAST_QUEUE)).consumerCount;
  } finally {
    await connection.close();
  }
}

/** Waits until `count` workers consume the LINE queues (a process takes seconds to start from source). */
async function consuming(count: number, workers: Workers): Promise<void> {
  await explained(
    waitFor(async () => (await multicastConsumers()) >= count, {
      what: `${count} worker(s) consuming`,
      timeoutMs: 60_000,
      intervalMs: 200,
    }),
    () => workers.output(),
  );
}

beforeAll(async () => {
  const connection = await amqp.connect(requireEnv('AMQP_URL'));
  try {
    const channel = await connection.createChannel();
    await declareQueues(channel, HERALD_QUEUES, 'quorum');
    // Messages of an earlier run belong to a database that is gone.
    for (const queue of LINE_QUEUES) await channel.purgeQueue(queue);
  } finally {
    await connection.close();
  }
  simulator = await startTestLineSimulator();
  // One database and one relay for the file; each test has its own official account (channel).
  t = await createTestDatabase();
  relay = spawnHerald(['relay'], roleEnv());
});
afterAll(async () => {
  await relay?.stop(10_000);
  await simulator?.close();
  await t?.drop();
});
afterEach(async () => {
  simulator.beforeRespond(null);
  await Promise.all(started.splice(0).map((child) => child.stop(10_000)));
  while (cleanups.length) await cleanups.pop()!();
});

/** A channel of its own for the test, a sealed audience of `members`, and a multicast campaign to it. */
async function multicast(name: string, members: number) {
  const world = await lineWorld(t.db, simulator, testLineSettings(simulator), {
    lineOaId: `oa-${name}`,
    audiences: { [`aud-${name}`]: members },
  });
  const service = campaignService(t.db);
  const campaign = await service.create(
    lineCampaign({
      name,
      organizationId: world.organizationId,
      lineOaId: world.lineOaId,
      audienceId: `aud-${name}`,
      ...TEST_LINE_CONTENT,
    }),
  );
  return { world, service, campaignId: campaign.campaignId };
}

/** The claim messages of a campaign and what the worker's inbox says of each. */
async function inboxOf(campaignId: string) {
  const { rows } = await t.db.query<{ epoch: number; status: string | null; error: string | null }>(
    `select (o.payload ->> 'epoch')::int as epoch, i.status, i.error
       from outbox o join event e on e.position = o.event_position
       left join inbox i on i.message_id = o.message_id::text and i.consumer = 'line-delivery'
      where e.stream_id = $1 order by o.id`,
    [campaignId],
  );
  return rows;
}

describe('LINE delivery under SIGKILL', () => {
  it('killed after LINE accepted a chunk, before recording it: the next worker re-sends it under the same key, LINE answers 409, each recipient once', async () => {
    const { world, service, campaignId } = await multicast('kill', 1_234); // chunks of 500, 500, 234
    const chunk1 = lineRetryKey(campaignId, 1, 1);
    const workers = new Workers(roleEnv());
    const first = workers.start();
    let killed = false;
    simulator.beforeRespond(async (call) => {
      if (call.retryKey !== chunk1 || killed) return;
      killed = true;
      await workers.kill(first); // LINE has accepted chunk 1; the worker never reads the answer
    });
    await consuming(1, workers);
    await service.sendNow(campaignId); // claimed under epoch 1; the relay publishes, the worker takes it

    await waitFor(() => killed && gone(first), { what: 'the worker killed in chunk 1', timeoutMs: 60_000 });
    const midway = await service.get(campaignId);
    expect(midway.status).toBe('DISPATCHING');
    expect(midway.line?.progress.chunksDone).toBe(1); // chunk 0 recorded; chunk 1 only LINE knows of
    expect(simulator.timesReceived(world.channelId, lineUserId(500))).toBe(1); // chunk 1's first member

    workers.start(); // takes the message RabbitMQ redelivered after the kill
    await explained(
      waitFor(async () => (await service.get(campaignId)).status === 'COMPLETED', {
        what: 'COMPLETED after the restart',
        timeoutMs: 60_000,
      }),
      () => workers.output(),
    );

    const done = await service.get(campaignId);
    const stats = simulator.stats(world.channelId);
    const chunk1Calls = stats.requests.filter((r) => r.retryKey === chunk1);
    expect(chunk1Calls.map((r) => r.status)).toEqual([200, 409]);
    expect(chunk1Calls[1]!.acceptedRequestId).toBe(chunk1Calls[0]!.requestId);
    expect(lineAcceptancesPerChunk(stats.requests, done)).toEqual([1, 1, 1]);
    expect(stats.requests.map((r) => r.retryKey)).toEqual(
      [0, 1, 1, 2].map((k) => lineRetryKey(campaignId, 1, k)),
    );
    expect(stats.distinctRecipients).toBe(1_234);
    expect(stats.recipientsDelivered).toBe(1_234); // receipts: nobody counted twice
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    expect(simulator.violationCount).toBe(0);
    // Herald recorded the 409 as chunk 1's acceptance, with the id LINE gave the first call.
    expect(done.line?.progress).toMatchObject({
      chunksAccepted: 3,
      recipientsAccepted: 1_234,
      duplicates: 1,
    });
    const accepted = (await service.history(campaignId)).find(
      (e) => e.type === 'LineChunkAccepted' && (e.data as { chunk: number }).chunk === 1,
    );
    expect(accepted?.data).toMatchObject({ retryKey: chunk1, acceptedRequestId: chunk1Calls[0]!.requestId });
    expect(await inboxOf(campaignId)).toEqual([{ epoch: 1, status: 'processed', error: null }]);
  });

  it('killed in the same window, then reclaimed by the reaper under the next epoch: the plan’s keys are reused, LINE answers 409, each recipient once', async () => {
    const { world, service, campaignId } = await multicast('reclaim', 1_234);
    const chunk1 = lineRetryKey(campaignId, 1, 1);
    // A short stale window, and a message nobody settled presumed lost soon: the reaper acts in seconds.
    const env = roleEnv({
      HERALD_CAMPAIGN_STALE_CLAIM_SECONDS: '2',
      HERALD_DELIVERY_HEARTBEAT_SECONDS: '1',
      HERALD_RELAY_LOCK_SECONDS: '1',
      HERALD_MESSAGE_LOST_AFTER_SECONDS: '2',
      HERALD_SCANNER_POLL_MS: '200',
    });
    const scanner = spawnRole('scanner', env);
    const workers = new Workers(env);
    const first = workers.start();
    let killed = false;
    simulator.beforeRespond(async (call) => {
      if (call.retryKey !== chunk1 || killed) return;
      killed = true;
      await workers.kill(first);
    });
    // The worker consumes before the claim: the eager reaper must not take the claim from a starting worker.
    await consuming(1, workers);
    await service.sendNow(campaignId);
    await waitFor(() => killed && gone(first), { what: 'the worker killed in chunk 1', timeoutMs: 60_000 });

    // No worker runs: the claim goes stale, its message counts as lost, the scanner reclaims and claims again.
    const reclaimed = await explained(
      waitFor(
        async () => {
          const c = await service.get(campaignId);
          return c.status === 'DISPATCHING' && c.claimEpoch === 3 ? c : undefined;
        },
        { what: 'the reclaim under epoch 3', timeoutMs: 30_000 },
      ),
      () => scanner.output(),
    );
    expect(reclaimed.line?.plan?.epoch).toBe(1); // the plan, and with it every chunk's key, stays
    expect(reclaimed.line?.progress.chunksDone).toBe(1);
    // The scanner stops before the next worker starts: while a process starts up nothing refreshes the
    // new claim, and a reaper this eager would reclaim it again.
    expect(await scanner.stop(10_000)).toBe(0);

    workers.start(); // both messages wait in the queue: epoch 1's (redelivered) and epoch 3's
    await explained(
      waitFor(async () => (await service.get(campaignId)).status === 'COMPLETED', {
        what: 'COMPLETED under epoch 3',
        timeoutMs: 60_000,
      }),
      () => workers.output(),
    );

    const done = await service.get(campaignId);
    expect(done.claimEpoch).toBe(3);
    expect(done.line?.plan?.epoch).toBe(1);
    const stats = simulator.stats(world.channelId);
    // Every call carried one of the plan's keys (none of epoch 3's own): chunk 1 again, answered 409.
    expect(stats.requests.map((r) => r.retryKey)).toEqual(
      [0, 1, 1, 2].map((k) => lineRetryKey(campaignId, 1, k)),
    );
    expect(stats.requests.filter((r) => r.retryKey === chunk1).map((r) => r.status)).toEqual([200, 409]);
    expect(lineAcceptancesPerChunk(stats.requests, done)).toEqual([1, 1, 1]);
    expect(stats.distinctRecipients).toBe(1_234);
    expect(stats.recipientsDelivered).toBe(1_234);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    expect(simulator.violationCount).toBe(0);
    expect(done.line?.progress).toMatchObject({
      chunksAccepted: 3,
      recipientsAccepted: 1_234,
      duplicates: 1,
    });
    const types = (await service.history(campaignId)).map((e) => e.type);
    expect(types.filter((type) => type === 'CampaignReclaimed')).toHaveLength(1);
    expect(types.filter((type) => type === 'LineDeliveryPlanned')).toHaveLength(1);
    // Epoch 1's message, redelivered to the new worker, is fenced off; epoch 3's delivered.
    await waitFor(async () => (await inboxOf(campaignId)).every((m) => m.status !== null), {
      what: 'both messages settled',
    });
    expect(await inboxOf(campaignId)).toEqual([
      {
        epoch: 1,
        status: 'discarded',
        error: expect.stringMatching(/stale epoch 1|COMPLETED, not DISPATCHING/),
      },
      { epoch: 3, status: 'processed', error: null },
    ]);
  });

  it('a 200,000-member multicast whose worker is SIGKILLed at five random points: every member once at LINE, and the progress Herald shows is LINE’s count', async () => {
    const MEMBERS = 200_000;
    const CHUNKS = MEMBERS / 500;
    const KILLS = 5;
    const seed = Number(process.env.HERALD_TEST_SEED ?? randomInt(2 ** 31));
    const random = mulberry32(seed);
    // One kill in each fifth of the plan, at least ten chunks apart: about half of them inside the in-doubt
    // window (LINE accepted, the worker never reads the answer), the others 0–30 ms after an answer
    // (recording the chunk, reading the next page, or sending the next chunk).
    const kills = Array.from({ length: KILLS }, (_, i) => ({
      chunk: i * (CHUNKS / KILLS) + 5 + Math.floor(random() * (CHUNKS / KILLS - 10)),
      inDoubt: random() < 0.5,
      delayMs: Math.floor(random() * 30),
    }));
    const what = `seed ${seed}, kills ${JSON.stringify(kills)}`;

    // Replicas: one delivers, the others stand by; after each kill RabbitMQ hands the message to one of
    // them. All are started first (a process takes seconds to start from source, and a start is CPU the
    // delivery would otherwise compete with).
    const workers = new Workers(roleEnv());
    for (let i = 0; i <= KILLS; i++) workers.start();
    const { world, service, campaignId } = await multicast('big', MEMBERS);
    const keys = new Map(
      Array.from({ length: CHUNKS }, (_, k) => [lineRetryKey(campaignId, 1, k), k] as const),
    );
    let next = 0;
    simulator.beforeRespond(async (call) => {
      const kill = kills[next];
      if (!kill || keys.get(call.retryKey ?? '') !== kill.chunk) return;
      next++;
      const victim = await workers.delivering(campaignId);
      if (kill.inDoubt) await workers.kill(victim);
      else setTimeout(() => void workers.kill(victim), kill.delayMs);
    });
    await consuming(KILLS + 1, workers);
    await service.sendNow(campaignId);

    await explained(
      waitFor(async () => (await service.get(campaignId)).status === 'COMPLETED', {
        what: `COMPLETED (${what})`,
        timeoutMs: 120_000,
        intervalMs: 200,
      }),
      () => workers.output(),
    );
    await waitFor(() => workers.kills === KILLS, { what: `${KILLS} kills (${what})` }); // a last one may lag

    // At LINE: each of the 400 planned chunks accepted exactly once; every member received it once.
    const done = await service.get(campaignId);
    const stats = simulator.stats(world.channelId);
    expect(plannedLineKeys(done)).toHaveLength(CHUNKS);
    const acceptances = lineAcceptancesPerChunk(stats.requests, done);
    expect(
      acceptances.flatMap((n, chunk) => (n === 1 ? [] : [{ chunk, n }])),
      what,
    ).toEqual([]);
    expect(stats.accepted, what).toBe(CHUNKS);
    expect(stats.distinctRecipients, what).toBe(MEMBERS);
    expect(stats.recipientsDelivered, what).toBe(MEMBERS);
    expect(stats.usersReceivedMoreThanOnce, what).toBe(0);
    expect(simulator.timesReceived(world.channelId, lineUserId(0))).toBe(1);
    expect(simulator.timesReceived(world.channelId, lineUserId(MEMBERS - 1))).toBe(1);
    expect(simulator.violationCount).toBe(0);
    // Each kill inside the in-doubt window left a chunk only LINE knew of: re-sent, answered 409.
    expect(stats.duplicates, what).toBeGreaterThanOrEqual(kills.filter((k) => k.inDoubt).length);

    // What Herald says of its progress is what LINE counted.
    const atLine = {
      chunksDone: CHUNKS,
      chunksAccepted: stats.accepted,
      recipientsAccepted: stats.distinctRecipients,
      chunksUnconfirmed: 0,
      recipientsUnconfirmed: 0,
      duplicates: stats.duplicates,
    };
    expect(done.line?.progress, what).toMatchObject(atLine);
    const showing = herald(t, ['campaigns', 'show', campaignId]); // a process: it runs beside the API check

    const api = await startTestApiOn(t);
    const { key } = await createApiKey(t.db, {
      organizationId: world.organizationId,
      role: 'operator',
      createdBy: 'test',
    });
    const view = await request(api, 'GET', `/v1/campaigns/${campaignId}`, { key });
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({ status: 'COMPLETED', line: { progress: atLine } });
    const shown = await showing;
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(
      `delivery: chunks ${CHUNKS}/${CHUNKS} done (accepted ${stats.accepted}, unconfirmed 0); ` +
        `recipients accepted ${stats.distinctRecipients}/${MEMBERS}, unconfirmed 0, not delivered 0; ` +
        `409 duplicates ${stats.duplicates}`,
    );
  });
});

/** `herald api` on the test's database, in this process, on a free loopback port: its URL. */
async function startTestApiOn(database: TestDatabase): Promise<string> {
  const runtime = createRuntime(
    database.config({ HERALD_API_PORT: '0', HERALD_API_HOST: '127.0.0.1', ...lineEnv(simulator) }),
    testLogger(),
    { registry: heraldRegistry, applicationName: 'herald-api-test' },
  );
  const server = await startApi(runtime);
  cleanups.push(async () => {
    await server.close();
    await runtime.close();
  });
  return server.url;
}

/** A small seeded PRNG (mulberry32): the kill points of a run can be replayed from its seed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let r = Math.imul(a ^ (a >>> 15), 1 | a);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 2 ** 32;
  };
}
