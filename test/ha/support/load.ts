/**
 * Continuous load for the HA tests (issue 24 item 3, ADR 0040): every aggregate's work through the
 * production paths against the clusters, counted where the effects land, so a failure test can say
 * "nothing acknowledged was lost, no effect twice, the money balances" (invariants 2–4, 9).
 *
 * - Herald runs as real processes from dist/ (`herald api`, `scanner`, `relay`, `worker`, `sms-gateway`)
 *   on a fresh database of postgres-ha (through its failover proxy), the three RabbitMQ nodes and the
 *   three Kafka brokers.
 * - Commands go through `herald api` over HTTP with the typed client (`herald/client`: an automatic
 *   Idempotency-Key, retries of 429/503 and network errors with the same key). A command is
 *   *acknowledged* when the API answered 2xx: only those are counted as owed.
 * - Effects are counted at the simulators and consumers: LINE accepted requests per retry key (the LINE
 *   test server), scheduled actions' `action_execute` messages per action id (a consumer in this process
 *   on the production consumer toolkit: inbox de-duplication, so a redelivery it drops is not an effect),
 *   cron runs' webhook calls per run id (an HTTP receiver here), SMS parts per number (the SMSC simulator)
 *   and charges/refunds (the billing simulator's ledger against Herald's campaign facts).
 *
 * `startHaLoad()` sets it up; `start()`/`stop()` issue commands at `ratePerSecond` (or `run(ms)`);
 * `report()` waits up to a deadline for every owed effect and gives the figures. Sizes are parameters:
 * the tests keep a few hundred items; `npm run soak:ha` can run it for longer.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { AmqpConnection, amqpUrls, declareQueues } from '../../../src/adapters/amqp/amqp-connection.js';
import type { LineSimulator } from '../../../src/aggregates/campaign/line/simulator/server.js';
import type { BillingSimulator } from '../../../src/aggregates/campaign/sms/billing-simulator.js';
import type { SmscSimulator } from '../../../src/aggregates/campaign/sms/smsc-simulator.js';
import { HERALD_QUEUES } from '../../../src/aggregates/campaign/topology.js';
import { CRON_EVENTS_QUEUE } from '../../../src/aggregates/cron/topology.js';
import { ACTION_EXECUTE_QUEUE, ACTION_QUEUES } from '../../../src/aggregates/scheduled-action/topology.js';
import { createApiKey } from '../../../src/api/auth.js';
import { createHeraldClient, type HeraldClient, HeraldProblemError } from '../../../src/client/index.js';
import { silentLogger } from '../../../src/logger.js';
import { waitFor } from '../../../src/testing/wait.js';
import { type Consumer, consume } from '../../../src/worker/consume.js';
import { KafkaFixture } from '../../kafka/support/kafka-fixture.js';
import { billingEnv, startTestBillingServer } from '../../support/billing.js';
import { type RunningHerald, spawnHerald } from '../../support/cli.js';
import { startHttpServer, type TestHttpServer } from '../../support/cron.js';
import {
  type LineWorld,
  lineAcceptancesPerChunk,
  lineEnv,
  lineWorld,
  startTestLineSimulator,
  testLineSettings,
} from '../../support/line.js';
import { freePort, type TestDatabase } from '../../support/services.js';
import { smsWorldEnv } from '../../support/smpp-world.js';
import { msisdns, smsService } from '../../support/sms.js';
import { gatewayEnv, startTestSmsc } from '../../support/smsc.js';
import { createHaDatabase, requireHa } from '../support.js';

export type LoadKind = 'line' | 'action' | 'cron' | 'sms';
export const LOAD_ROLES = ['api', 'scanner', 'relay', 'worker', 'sms-gateway'] as const;
export type LoadRole = (typeof LOAD_ROLES)[number];

export interface HaLoadOptions {
  /** Commands per second over all kinds (default 4: the tests share two cores with other tiers; the soak runs 8). */
  ratePerSecond?: number;
  /** Share of each kind among the commands (default line 1, action 2, sms 1); cron jobs are created once. */
  mix?: Partial<Record<'line' | 'action' | 'sms', number>>;
  /** Recipients per SMS campaign (default 3). */
  smsRecipients?: number;
  /** Cron jobs (every second, a webhook here) created at start (default 2). */
  cronJobs?: number;
  /** Seconds between an action's creation and its due time (default 1). */
  actionDelaySeconds?: number;
  /** Extra environment for every role (e.g. to show a test fails without a guarantee). */
  env?: Record<string, string>;
  /** false: the action_execute consumer here has no inbox (every delivery counts as an effect). */
  actionInbox?: boolean;
  /**
   * `alter database … set` on the load's database before the roles connect (e.g. `synchronous_commit:
   * 'off'` to see the failover test fail).
   */
  databaseSettings?: Record<string, string>;
  /** Organization of every command (default `org-ha`). */
  organizationId?: string;
}

/** One command the API acknowledged (2xx). */
export interface Acknowledged {
  kind: LoadKind;
  /** The campaign, action or cron job id. */
  id: string;
  /** Epoch ms at which the 2xx came back (this process's clock: only compared with itself). */
  at: number;
  /** SMS: the numbers of the campaign. */
  msisdns?: string[];
}

export interface KindReport {
  /** Items owed: acknowledged commands (cron: runs Herald committed for the acknowledged jobs). */
  acknowledged: number;
  /** Items whose effect arrived. */
  delivered: number;
  /** Owed items with no effect by the deadline (their ids in `lostIds`, at most 20). */
  lost: number;
  lostIds: string[];
  /** Items with an effect twice or more (a second accepted LINE request, SMS part, webhook call, …). */
  duplicated: number;
  duplicatedIds: string[];
}

export interface HaLoadReport {
  seconds: number;
  /**
   * Commands sent, acknowledged (2xx), refused (a final 4xx: e.g. a LINE start that passed while the
   * request waited on a loaded machine) or failed (a 5xx, a 409 in progress or a network error still
   * there when the caller gave up).
   */
  commands: { sent: number; acknowledged: number; refused: number; failed: number; failures: string[] };
  line: KindReport;
  action: KindReport & { redeliveriesDropped: number };
  cron: KindReport & {
    jobs: number;
    /** Runs by `fate/status` (an occurrence skipped because the previous run still ran is `skipped-overlap/skipped`). */
    fates: Record<string, number>;
  };
  /** Per recipient (number). */
  sms: KindReport & { campaigns: number };
  money: {
    /** Herald's facts over the organization's SMS campaigns: charged (totalCost) − refunded. */
    heraldNet: string;
    /** The billing simulator's ledger: deductions − refunds. */
    ledgerNet: string;
    /**
     * Charges of SMS campaigns left DRAFT by a creation cut between its charge and its record: the
     * stale-DRAFT recovery reverses them (HERALD_SMS_DRAFT_STALE_MINUTES); balanced counts them apart.
     */
    awaitingRecovery: string;
    draftCampaigns: number;
    /** Deduction keys the ledger applied twice (the simulator refuses it; a guard on the ledger's side). */
    doubleCharged: number;
    balanced: boolean;
  };
  /** The lost LINE campaigns' and actions' statuses and outbox rows (of the first 20 of each). */
  lostState: string[];
  /** lost + duplicated over every kind, and money balanced. */
  ok: boolean;
}

export interface HaLoad {
  t: TestDatabase;
  client: HeraldClient;
  roles: Map<LoadRole, RunningHerald>;
  /** The pod name each role records in its events' meta (`HERALD_POD`). */
  pods: Record<LoadRole, string>;
  acknowledged: readonly Acknowledged[];
  /** The SMS topics on kafka-cluster (submissions, delivery reports). */
  kafkaTopics: readonly string[];
  line: LineSimulator;
  smsc: SmscSimulator;
  billing: BillingSimulator;
  /** Starts issuing commands (no-op when running). */
  start(): void;
  /** Stops issuing commands and pauses the cron jobs; waits for the commands in flight. */
  stop(): Promise<void>;
  /** start(), `ms` of load (waiting with the clock of this process), stop(). */
  run(ms: number): Promise<void>;
  /** Waits up to `deadlineMs` for every owed effect, then counts. */
  report(deadlineMs?: number): Promise<HaLoadReport>;
  /** The roles' output tails (for failure messages). */
  output(): string;
  close(): Promise<void>;
}

const round = (units: number) => (units / 10_000).toFixed(4);
const toUnits = (amount: string) => Math.round(Number(amount) * 10_000);

/** Starts the world and the roles; commands flow after `start()`. */
export async function startHaLoad(options: HaLoadOptions = {}): Promise<HaLoad> {
  const organizationId = options.organizationId ?? 'org-ha';
  const ratePerSecond = options.ratePerSecond ?? 4;
  const mix = { line: 1, action: 2, sms: 1, ...options.mix };
  const smsRecipients = options.smsRecipients ?? 3;
  const amqpList = requireHa('HERALD_HA_AMQP_URLS');
  const brokers = requireHa('HERALD_HA_KAFKA_BROKERS').split(',');
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    while (cleanups.length) await cleanups.pop()!().catch(() => {});
  };

  try {
    const t = await createHaDatabase();
    cleanups.push(() => t.drop());
    for (const [name, value] of Object.entries(options.databaseSettings ?? {})) {
      const { rows } = await t.db.query<{ db: string }>('select current_database() as db');
      await t.db.query(`alter database "${rows[0]!.db}" set ${name} = '${value.replace(/'/g, "''")}'`);
    }

    // The fixed queue names (seeds 000–004) hold messages of earlier runs' databases: start empty.
    const topology = await AmqpConnection.connect({ url: amqpList, name: 'herald-ha-load-topology' });
    const channel = await topology.channel();
    const queues = [...HERALD_QUEUES, ...ACTION_QUEUES, CRON_EVENTS_QUEUE];
    await declareQueues(channel, queues, 'quorum');
    for (const queue of queues) await channel.purgeQueue(queue);
    await topology.close();

    // SMS topics with the cluster's replication (RF 3, min ISR 2), leaders elected before use.
    const kafka = await KafkaFixture.open(brokers);
    cleanups.push(() => kafka.close());
    const kafkaTopics = [await kafka.topic('ha_sms_submit'), await kafka.topic('ha_sms_dlr')] as const;
    const smsBase = smsWorldEnv(...kafkaTopics);

    const line = await startTestLineSimulator();
    cleanups.push(() => line.close());
    const billing = await startTestBillingServer();
    cleanups.push(() => billing.close());
    billing.credit(organizationId, '100000000', 'ha-load-credit');
    const receiver: TestHttpServer = await startHttpServer();
    cleanups.push(() => receiver.close());

    const smsc = await startTestSmsc({ behaviour: t.config(smsBase).sms.simulator });
    cleanups.push(() => smsc.close());

    const apiPort = await freePort();
    const env: Record<string, string> = {
      DATABASE_URL: t.url,
      HERALD_SCHEMA: t.schema,
      AMQP_URL: amqpList,
      KAFKA_BROKERS: brokers.join(','),
      HERALD_LOG_LEVEL: process.env.HERALD_TEST_LOG ?? 'warn',
      HERALD_METRICS_HOST: '127.0.0.1',
      HERALD_METRICS_PORT: '0',
      HERALD_API_HOST: '127.0.0.1',
      HERALD_API_PORT: String(apiPort),
      HERALD_SCANNER_POLL_MS: '200',
      HERALD_RELAY_IDLE_POLL_MS: '100',
      // The relay's retry schedule stays the production one (1 s doubling, 5 attempts): a broker's
      // refusals during a leader election must not turn rows dead faster than in a deployment.
      HERALD_ACTIONS_RETRY_BASE_MS: '50',
      HERALD_ACTIONS_RETRY_MAX_MS: '500',
      HERALD_ACTIONS_STALE_SECONDS: '3',
      HERALD_ACTIONS_HEARTBEAT_SECONDS: '1',
      HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true',
      HERALD_CRON_MIN_INTERVAL_SECONDS: '1',
      HERALD_CRON_STALE_RUN_SECONDS: '10',
      ...lineEnv(line, {
        HERALD_LINE_BROADCAST_PER_HOUR: '360000',
        HERALD_LINE_NARROWCAST_PER_HOUR: '360000',
      }),
      ...billingEnv(billing, { HERALD_BILLING_TIMEOUT_MS: '2000' }),
      ...gatewayEnv(smsc.port, {}, smsBase),
      ...smsBase,
      ...options.env,
    };

    const world: LineWorld = await lineWorld(t.db, line, testLineSettings(line), {
      organizationId,
      lineOaId: 'oa-ha',
    });
    const { key } = await createApiKey(t.db, { organizationId, role: 'operator', createdBy: 'ha-load' });

    // The action_execute consumer: the production toolkit (inbox in the handler's transaction).
    const actionEffects = new Map<string, number>();
    const countAction = (payload: unknown) => {
      const id = (payload as { actionId?: string }).actionId;
      if (id) actionEffects.set(id, (actionEffects.get(id) ?? 0) + 1);
    };
    let actionConsumer: Consumer | undefined;
    let bareConsumer: amqp.ChannelModel | undefined;
    if (options.actionInbox === false) {
      // For showing the test can fail: every delivery is an effect, redeliveries too.
      const urls = amqpUrls(amqpList);
      const connectBare = async (): Promise<void> => {
        for (const url of urls) {
          try {
            const model = await amqp.connect(url);
            model.on('error', () => {});
            model.on('close', () => {
              if (bareConsumer === model) void connectBare().catch(() => {});
            });
            const ch = await model.createChannel();
            ch.on('error', () => {});
            await ch.prefetch(32);
            await ch.consume(ACTION_EXECUTE_QUEUE, (message) => {
              if (!message) return;
              countAction(JSON.parse(message.content.toString()));
              // The effect is done; the ack follows the rest of the processing (a redelivery meanwhile repeats it).
              setTimeout(() => {
                try {
                  ch.ack(message);
                } catch {}
              }, 200);
            });
            bareConsumer = model;
            return;
          } catch {}
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
        return connectBare();
      };
      await connectBare();
      cleanups.push(async () => {
        const model = bareConsumer;
        bareConsumer = undefined;
        await model?.close().catch(() => {});
      });
    } else {
      actionConsumer = await consume(
        { db: t.db, amqp: amqpList, logger: silentLogger },
        ACTION_EXECUTE_QUEUE,
        async (message) => {
          message.afterCommit(() => countAction(message.payload));
        },
        { consumer: 'ha-load-action-effect', retryDelayMs: 500 },
      );
      cleanups.push(() => actionConsumer!.stop({ timeoutMs: 5_000 }));
    }

    const pods = Object.fromEntries(LOAD_ROLES.map((role) => [role, `ha-${role}`])) as Record<
      LoadRole,
      string
    >;
    const roles = new Map<LoadRole, RunningHerald>();
    for (const role of LOAD_ROLES) roles.set(role, spawnHerald([role], { ...env, HERALD_POD: pods[role] }));
    cleanups.push(() => Promise.all([...roles.values()].map((r) => r.stop(15_000))));
    // A test that times out leaves its finally unrun: the roles must not outlive this process (a worker of
    // a dropped database would take the next run's messages from the fixed queues).
    const orphanGuard = () => {
      for (const role of roles.values()) role.process.kill('SIGKILL');
    };
    process.once('exit', orphanGuard);
    cleanups.push(async () => void process.removeListener('exit', orphanGuard));
    const tail = (text: string) => (text.length > 3_000 ? `…${text.slice(-3_000)}` : text);
    const output = () => [...roles].map(([n, r]) => `--- herald ${n} ---\n${tail(r.output())}`).join('\n');

    const url = `http://127.0.0.1:${apiPort}`;
    await waitFor(
      async () => {
        for (const [name, role] of roles)
          if (role.process.exitCode !== null) throw new Error(`herald ${name} exited:\n${output()}`);
        return (await fetch(`${url}/healthz`).catch(() => null))?.status === 200;
      },
      { what: 'herald api to listen', timeoutMs: 60_000 },
    );
    const client = createHeraldClient({
      baseUrl: url,
      credential: key,
      retries: { maxAttempts: 8, baseDelayMs: 200 },
    });

    const acknowledged: Acknowledged[] = [];
    const failures: string[] = [];
    let sent = 0;
    let failed = 0;
    let refused = 0;
    let smsCount = 0;
    const cronJobs: string[] = [];
    const started = Date.now();

    /**
     * A caller with a deadline: the same Idempotency-Key again, until 20 s, after what the client's own
     * retries (a few, docs/guides/client.md) gave up on: a 409 "still in progress" or a 5xx (after its
     * Retry-After), or a network error; a 4xx refusal is final.
     */
    const command = async <T>(call: (header: { 'idempotency-key': string }) => Promise<T>): Promise<T> => {
      const header = { 'idempotency-key': randomUUID() };
      const deadline = Date.now() + 20_000;
      for (;;) {
        try {
          return await call(header);
        } catch (error) {
          const problem = error instanceof HeraldProblemError ? error : undefined;
          const again =
            !problem ||
            problem.status >= 500 ||
            (problem.status === 409 && problem.retryAfterMs !== undefined);
          if (!again || Date.now() > deadline) throw error;
          await new Promise((resolve) => setTimeout(resolve, problem?.retryAfterMs ?? 500));
        }
      }
    };

    const issue = async (kind: 'line' | 'action' | 'sms') => {
      sent++;
      try {
        if (kind === 'line') {
          const created = await command((header) =>
            client.POST('/v1/campaigns', {
              params: { header },
              body: {
                channel: 'line',
                name: `ha line ${sent}`,
                castType: 'broadcast',
                lineOaId: world.lineOaId,
                // A start is required; 10 s ahead of this clock (the API judges it against the database's).
                startAt: new Date(Date.now() + 10_000).toISOString(),
                line: { messages: [{ type: 'text', text: `ha load ${sent}` }] },
              } as never,
            }),
          );
          acknowledged.push({ kind, id: (created as { campaignId: string }).campaignId, at: Date.now() });
        } else if (kind === 'action') {
          const created = await command((header) =>
            client.POST('/v1/actions', {
              params: { header },
              body: {
                mode: 'normal',
                actionType: 'send_message',
                actionConfig: { template: `ha ${sent}` },
                delaySeconds: options.actionDelaySeconds ?? 1,
              },
            }),
          );
          acknowledged.push({ kind, id: created.actionId, at: Date.now() });
        } else {
          const numbers = msisdns(smsRecipients, '017', 1_000_000 + smsCount++ * smsRecipients);
          const created = await command((header) =>
            client.POST('/v1/campaigns', {
              params: { header },
              body: {
                channel: 'sms',
                name: `ha sms ${sent}`,
                messageType: 'PROMOTIONAL',
                lang: 'bn',
                campaignId: `BTRC-HA-${sent}`,
                templateType: 'GENERIC',
                template: `ঈদ মোবারক ${sent}`,
                scheduleType: 'INSTANT',
                recipients: numbers.map((msisdn) => ({ msisdn })),
              } as never,
            }),
          );
          acknowledged.push({
            kind,
            id: (created as { campaignId: string }).campaignId,
            at: Date.now(),
            msisdns: numbers,
          });
        }
      } catch (error) {
        const status = error instanceof HeraldProblemError ? error.status : 0;
        if (status >= 400 && status < 500 && status !== 409) refused++;
        else failed++;
        if (failures.length < 20) failures.push(`${kind}: ${(error as Error).message}`);
      }
    };

    const weighted: ('line' | 'action' | 'sms')[] = [];
    for (const kind of ['line', 'action', 'sms'] as const)
      for (let i = 0; i < mix[kind]; i++) weighted.push(kind);

    let running: Promise<void> | undefined;
    let issuing = false;
    const inFlight = new Set<Promise<void>>();
    const loop = async () => {
      const interval = 1_000 / ratePerSecond;
      let next = Date.now();
      for (let i = 0; issuing; i++) {
        const command = issue(weighted[i % weighted.length]!);
        inFlight.add(command);
        void command.finally(() => inFlight.delete(command));
        next += interval;
        const wait = next - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
      await Promise.all(inFlight);
    };

    const start = () => {
      if (issuing) return;
      issuing = true;
      running = (async () => {
        while (cronJobs.length < (options.cronJobs ?? 2)) {
          sent++;
          const job = await command((header) =>
            client.POST('/v1/cron-jobs', {
              params: { header },
              body: {
                name: `ha cron ${cronJobs.length + 1}`,
                schedule: '* * * * * *',
                timezone: 'UTC',
                jobType: 'webhook',
                payload: { url: `${receiver.url}/cron` },
              } as never,
            }),
          );
          cronJobs.push((job as { jobId: string }).jobId);
          acknowledged.push({ kind: 'cron', id: (job as { jobId: string }).jobId, at: Date.now() });
        }
        await loop();
      })();
    };
    const stop = async () => {
      issuing = false;
      await running;
      for (const jobId of cronJobs) {
        await client
          .POST('/v1/cron-jobs/{id}/pause', {
            params: { path: { id: jobId } },
            body: { reason: 'load over' },
          })
          .catch(() => {});
      }
    };

    const report = async (deadlineMs = 60_000): Promise<HaLoadReport> => {
      const { service } = smsService(t, { settings: t.config(env).sms });
      const of = (kind: LoadKind) => acknowledged.filter((a) => a.kind === kind);
      const kindReport = (owed: string[], effects: (id: string) => number): KindReport => {
        const lost = owed.filter((id) => effects(id) === 0);
        const twice = owed.filter((id) => effects(id) > 1);
        return {
          acknowledged: owed.length,
          delivered: owed.length - lost.length,
          lost: lost.length,
          lostIds: lost.slice(0, 20),
          duplicated: twice.length,
          duplicatedIds: twice.slice(0, 20),
        };
      };
      // LINE: accepted requests per planned chunk key (a broadcast: one chunk).
      const linePlans = new Map<string, { campaignId: string; line: unknown }>();
      const lineEffects = (id: string) => {
        const campaign = linePlans.get(id);
        if (!campaign) return 0;
        const chunks = lineAcceptancesPerChunk(line.stats(world.channelId).requests, campaign as never);
        if (chunks.length === 0 || chunks.some((n) => n === 0)) return 0;
        return Math.max(...chunks);
      };
      const cronRuns = async () => {
        const { rows } = await t.db.query<{ id: string }>(
          `select id::text from job_run where job_id = any($1::uuid[])
              and status not in ('skipped', 'missed', 'paused', 'cancelled')`,
          [cronJobs],
        );
        return rows.map((r) => r.id);
      };
      const cronCalls = () => {
        const calls = new Map<string, number>();
        for (const request of receiver.to('/cron')) {
          const id = String(request.headers['x-herald-run-id']);
          calls.set(id, (calls.get(id) ?? 0) + 1);
        }
        return calls;
      };
      const smsReceived = () => {
        const received = new Map<string, number>();
        for (const [msisdn, parts] of Object.entries(smsc.takePeriod().received))
          received.set(msisdn.slice(-10), Math.max(...parts.map((p) => p[4])));
        return received;
      };
      const smsOwed = () => of('sms').flatMap((a) => a.msisdns ?? []);
      const pending = async () => {
        for (const a of of('line')) {
          if (linePlans.has(a.id) && lineEffects(a.id) > 0) continue;
          const campaign = await client
            .GET('/v1/campaigns/{id}', { params: { path: { id: a.id } } })
            .catch(() => undefined);
          if (campaign) linePlans.set(a.id, campaign as never);
        }
        const waiting: string[] = [];
        for (const a of of('line')) if (lineEffects(a.id) === 0) waiting.push(`line ${a.id}`);
        for (const a of of('action')) if (!actionEffects.has(a.id)) waiting.push(`action ${a.id}`);
        const calls = cronCalls();
        for (const id of await cronRuns()) if (!calls.has(id)) waiting.push(`cron run ${id}`);
        const received = smsReceived();
        for (const msisdn of smsOwed()) if (!received.has(msisdn.slice(-10))) waiting.push(`sms ${msisdn}`);
        return waiting;
      };
      let waiting: string[] = [];
      await waitFor(
        async () => {
          waiting = await pending();
          return waiting.length === 0;
        },
        { timeoutMs: deadlineMs, intervalMs: 500, what: 'every acknowledged effect' },
      ).catch(() => {});

      // SMS money: Herald's facts (every SMS campaign of the organization, acknowledged or not) against
      // the billing ledger. A creation cut after its charge and before recording it leaves a DRAFT the
      // stale-DRAFT recovery reverses later (HERALD_SMS_DRAFT_STALE_MINUTES): its charge is "awaiting
      // recovery", not a difference.
      const smsIds = of('sms').map((a) => a.id);
      const ledger = () => {
        const net = new Map<string, number>();
        let total = 0;
        for (const entry of billing.entries(organizationId)) {
          if (entry.kind === 'credit') continue;
          const units = entry.kind === 'deduction' ? toUnits(entry.amount) : -toUnits(entry.amount);
          total += units;
          const campaign = /^campaign:([^:]+)/.exec(entry.key)?.[1];
          if (campaign) net.set(campaign, (net.get(campaign) ?? 0) + units);
        }
        return { total, net };
      };
      const herald = async () => {
        const { rows } = await t.db.query<{ id: string; status: string }>(
          `select id::text, status from campaign where organization_id = $1 and channel = 'sms'`,
          [organizationId],
        );
        let units = 0;
        const drafts: string[] = [];
        for (const row of rows) {
          if (row.status === 'DRAFT') drafts.push(row.id);
          const sms = (await service.get(row.id)).sms;
          if (sms) units += toUnits(String(sms.totalCost)) - toUnits(String(sms.refundedCost));
        }
        return { units, drafts };
      };
      const money = async () => {
        const h = await herald();
        const l = ledger();
        const awaiting = h.drafts.reduce((sum, id) => sum + (l.net.get(id.toLowerCase()) ?? 0), 0);
        return { heraldUnits: h.units, ledgerUnits: l.total, awaiting, drafts: h.drafts.length };
      };
      let m = await money();
      await waitFor(
        async () => {
          m = await money();
          return m.heraldUnits === m.ledgerUnits - m.awaiting;
        },
        { timeoutMs: 10_000, intervalMs: 500, what: 'the money balanced' },
      ).catch(() => {});
      const deductions = new Map<string, number>();
      for (const entry of billing.entries(organizationId)) {
        if (entry.kind === 'deduction') deductions.set(entry.key, (deductions.get(entry.key) ?? 0) + 1);
      }
      const doubleCharged = [...deductions.values()].filter((n) => n > 1).length;

      const calls = cronCalls();
      const received = smsReceived();
      const { rows: fateRows } = await t.db.query<{ fate: string; n: number }>(
        `select fate || '/' || status as fate, count(*)::int as n from job_run where job_id = any($1::uuid[]) group by 1 order by 1`,
        [cronJobs],
      );
      const fates = Object.fromEntries(fateRows.map((r) => [r.fate, r.n]));
      const lineReport = kindReport(
        of('line').map((a) => a.id),
        lineEffects,
      );
      // Where the lost LINE campaigns and actions stand (status, their outbox rows), for the failure message.
      const { rows: lostState } = await t.db.query<{ what: string }>(
        `select s.kind || ' ' || s.status || ' x' || count(*) || ' (outbox ' ||
                coalesce(string_agg(distinct o.destination || ' ' || o.status || ' attempts ' || o.attempts ||
                                  coalesce(' inbox ' || i.status, ''), ', '), 'none') ||
                ')' as what
           from (select 'campaign' as kind, id, status from campaign where id = any($1::uuid[])
                 union all
                 select 'action', id, status from scheduled_action where id = any($1::uuid[])) s
           left join event e on e.stream_id = s.id::text
           left join outbox o on o.event_position = e.position
           left join inbox i on i.message_id = o.message_id::text
          group by s.kind, s.status`,
        [
          [
            ...lineReport.lostIds,
            ...kindReport(
              of('action').map((a) => a.id),
              (id) => actionEffects.get(id) ?? 0,
            ).lostIds,
          ],
        ],
      );
      const redeliveriesDropped = actionConsumer?.stats.duplicates ?? 0;
      const actionReport = kindReport(
        of('action').map((a) => a.id),
        (id) => actionEffects.get(id) ?? 0,
      );
      const cronReport = kindReport(await cronRuns(), (id) => calls.get(id) ?? 0);
      const smsReport = kindReport(smsOwed(), (msisdn) => received.get(msisdn.slice(-10)) ?? 0);
      const moneyReport = {
        heraldNet: round(m.heraldUnits),
        ledgerNet: round(m.ledgerUnits),
        awaitingRecovery: round(m.awaiting),
        draftCampaigns: m.drafts,
        doubleCharged,
        balanced: m.heraldUnits === m.ledgerUnits - m.awaiting && doubleCharged === 0,
      };
      const all = [lineReport, actionReport, cronReport, smsReport];
      return {
        seconds: Math.round((Date.now() - started) / 100) / 10,
        commands: { sent, acknowledged: acknowledged.length, refused, failed, failures },
        line: lineReport,
        action: { ...actionReport, redeliveriesDropped },
        cron: { ...cronReport, jobs: cronJobs.length, fates },
        sms: { ...smsReport, campaigns: smsIds.length },
        money: moneyReport,
        lostState: lostState.map((r) => r.what),
        ok: moneyReport.balanced && all.every((r) => r.lost === 0 && r.duplicated === 0),
      };
    };

    return {
      t,
      client,
      roles,
      pods,
      acknowledged,
      kafkaTopics,
      line,
      smsc,
      billing,
      start,
      stop,
      async run(ms) {
        start();
        await new Promise((resolve) => setTimeout(resolve, ms));
        await stop();
      },
      report,
      output,
      close: cleanup,
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** One line per kind, for logs and the soak's output. */
export function formatReport(report: HaLoadReport): string {
  const kind = (name: string, r: KindReport) =>
    `${name}: acknowledged ${r.acknowledged}, delivered ${r.delivered}, lost ${r.lost}, duplicated ${r.duplicated}` +
    (r.lostIds.length ? ` (lost ${r.lostIds.slice(0, 5).join(' ')})` : '') +
    (r.duplicatedIds.length ? ` (twice ${r.duplicatedIds.slice(0, 5).join(' ')})` : '');
  return [
    `load: ${report.seconds} s, commands sent ${report.commands.sent}, acknowledged ${report.commands.acknowledged}, refused ${report.commands.refused}, failed ${report.commands.failed}`,
    kind('line campaigns', report.line),
    `${kind('scheduled actions', report.action)}, redeliveries dropped by the inbox ${report.action.redeliveriesDropped}`,
    `${kind(`cron runs (${report.cron.jobs} jobs)`, report.cron)}, runs by fate/status ${JSON.stringify(report.cron.fates)}`,
    `${kind(`sms recipients (${report.sms.campaigns} campaigns)`, report.sms)}`,
    `money: Herald charged − refunded ${report.money.heraldNet}, billing ledger ${report.money.ledgerNet} (of which ${report.money.awaitingRecovery} on ${report.money.draftCampaigns} DRAFT campaigns awaiting the stale-DRAFT recovery), keys charged twice ${report.money.doubleCharged}: ${report.money.balanced ? 'balanced' : 'NOT balanced'}`,
    ...report.lostState.map((state) => `  lost: ${state}`),
    ...report.commands.failures.slice(0, 5).map((f) => `  failed command: ${f}`),
  ].join('\n');
}
