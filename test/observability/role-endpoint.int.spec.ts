/**
 * The role endpoint over real HTTP, with real roles on real PostgreSQL and RabbitMQ: several roles in
 * one process share one endpoint (port 0: a free port), `/metrics` follows the work they do (a relay
 * over outbox rows, a consumer over messages, a scanner over due campaigns, a projector's lease and
 * lag), and `/readyz` goes 503 when the database is unreachable (a TCP proxy between the roles and the
 * shared PostgreSQL is cut, never the server itself) and when a lease is older than its threshold, and
 * back to 200 after. Ages are the database clock's; waits are conditions with deadlines.
 */
import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { deadQueueName, retryQueueName } from '../../src/adapters/amqp/amqp-consumer.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import { ConfigError, PermanentError, TransientError } from '../../src/errors.js';
import { defineAggregate } from '../../src/registry/module.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import type { RoleDefinition } from '../../src/registry/role.js';
import { maintenanceRole } from '../../src/roles/maintenance-role.js';
import { projectorRole } from '../../src/roles/projector-role.js';
import { relayRole } from '../../src/roles/relay-role.js';
import { runRole } from '../../src/roles/runtime.js';
import { scannerRole } from '../../src/roles/scanner-role.js';
import { workerRole } from '../../src/roles/worker-role.js';
import { waitFor } from '../../src/testing/wait.js';
import { defineConsumer } from '../../src/worker/consumer-definition.js';
import { BrokerFixture, seedOutbox } from '../outbox/support/fixtures.js';
import { campaignService, dbTimePlus, lineCampaign } from '../support/campaigns.js';
import { ledgerAggregate } from '../support/ledger-aggregate.js';
import { readiness, scrape } from '../support/metrics.js';
import { testLogger } from '../support/roles.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const RETRY_DELAY_MS = 100;
const LAG = 'herald_projector_lag_seconds{projection="dispatch_stats",source="events"}';

let t: TestDatabase;
let broker: BrokerFixture;
const running: { stop: () => Promise<void> }[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  broker = await BrokerFixture.open();
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((role) => role.stop()));
  // The scanner test leaves campaign claims pending: no later relay may publish them to the seed's
  // shared queues.
  await t.db.query('truncate outbox');
});

afterAll(async () => {
  await broker?.close();
  await t?.drop();
});

/**
 * Runs a role as the CLI does (runRole: its own runtime, the process's endpoint) until stopped;
 * resolves with the endpoint's URL once the role runs.
 */
async function start(
  name: string,
  role: RoleDefinition,
  config: HeraldConfig,
  registry: AggregateRegistry,
): Promise<{ url: string; stop: () => Promise<void> }> {
  const controller = new AbortController();
  let url: string | undefined;
  const capturing: RoleDefinition = {
    summary: role.summary,
    run(runtime, signal) {
      url = runtime.endpoint?.url;
      return role.run(runtime, signal);
    },
  };
  const done = runRole(name, capturing, {
    config,
    logger: testLogger(),
    registry,
    signal: controller.signal,
  });
  done.catch(() => {}); // surfaced by stop()
  const handle = {
    stop: async () => {
      controller.abort();
      await done;
    },
  };
  running.push(handle);
  await Promise.race([waitFor(() => url, { what: `${name} running` }), done]);
  return { url: url!, stop: handle.stop };
}

/** The ledger aggregate with a consumer whose outcome each message's `index` picks. */
function ledgerWithConsumer(queue: string, consumer: string): AggregateRegistry {
  return new AggregateRegistry([
    defineAggregate({
      aggregate: ledgerAggregate(queue),
      topology: { amqpQueues: [queue] },
      consumers: () => [
        defineConsumer({
          consumer,
          transport: 'amqp',
          sources: [queue],
          parse: (payload) => payload as { index: number },
          handler: async (message) => {
            const { index } = message.payload;
            if (index === 1) throw new PermanentError('index 1 is refused');
            if (index === 2) throw new TransientError('index 2 never works');
            if (index === 3) return { discard: 'index 3 is not for this consumer' };
            return 'processed';
          },
        }),
      ],
    }),
  ]);
}

const delta = (after: Map<string, number>, before: Map<string, number>, key: string) =>
  (after.get(key) ?? 0) - (before.get(key) ?? 0);

describe('role endpoint', () => {
  it('serves every role of the process from one endpoint; /metrics follows relay, consumer and scanner work', async () => {
    const queue = uniqueName('herald_test_metrics');
    const missing = uniqueName('herald_test_unroutable'); // never declared: unroutable, dead at once
    const consumer = uniqueName('metrics-consumer');
    for (const name of [queue, retryQueueName(queue, RETRY_DELAY_MS), deadQueueName(queue)])
      broker.adopt(name);
    const registry = ledgerWithConsumer(queue, consumer);
    const config = t.config({
      HERALD_CONSUMER_MAX_ATTEMPTS: '2',
      HERALD_CONSUMER_RETRY_DELAY_MS: String(RETRY_DELAY_MS),
      HERALD_RELAY_MAX_ATTEMPTS: '1',
      HERALD_READY_STARTUP_GRACE_SECONDS: '0',
      HERALD_READY_MAX_LEASE_AGE_SECONDS: '0', // no projector in this test
    });

    const seeded = await seedOutbox(t.db, { count: 20, destination: queue });
    await seedOutbox(t.db, { count: 2, destination: missing });
    const worker = await start('worker', workerRole, config, registry);
    const url = worker.url;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(url).port).not.toBe('9464');

    const before = await scrape(url);
    expect(before.get('herald_outbox_pending{sink="amqp"}')).toBe(22);
    expect(before.get('herald_outbox_pending{sink="kafka"}')).toBe(0);
    expect(before.get('herald_outbox_oldest_pending_age_seconds{sink="amqp"}')).toBeGreaterThan(0);
    expect(before.get('herald_metrics_database_up')).toBe(1);

    const relay = await start('relay', relayRole, config, registry);
    expect(relay.url).toBe(url); // one endpoint for the process
    const settled = (m: Map<string, number>, outcome: string) =>
      delta(
        m,
        before,
        `herald_consumer_messages_total{queue="${queue}",consumer="${consumer}",outcome="${outcome}"}`,
      );
    const after = await waitFor(
      async () => {
        const m = await scrape(url);
        return settled(m, 'processed') === 17 && settled(m, 'dead') === 1 ? m : null;
      },
      { what: 'the consumer settled every message' },
    );
    // The consumer's retry and dead-letter copies are its own publishes, not the relay's.
    expect(delta(after, before, 'herald_relay_published_total{sink="amqp"}')).toBe(20);
    expect(delta(after, before, 'herald_relay_failed_total{sink="amqp"}')).toBe(2);
    expect(delta(after, before, 'herald_relay_dead_total{sink="amqp"}')).toBe(2);
    expect(delta(after, before, 'herald_relay_batch_duration_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(
      delta(after, before, 'herald_relay_confirm_duration_seconds_count{sink="amqp"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(after.get('herald_relay_claim_age_seconds')).toBe(0); // nothing held once the batches are marked
    expect(settled(after, 'rejected')).toBe(1);
    expect(settled(after, 'discarded')).toBe(1);
    expect(settled(after, 'retried')).toBe(1);
    expect(settled(after, 'duplicate')).toBe(0);
    expect(after.get('herald_outbox_pending{sink="amqp"}')).toBe(0);
    expect(after.get('herald_outbox_oldest_pending_age_seconds{sink="amqp"}')).toBe(0);
    expect(after.get('herald_outbox_dead{sink="amqp"}')).toBe(2);
    expect(after.get('herald_outbox_parked_keys{sink="amqp"}')).toBe(0);
    // Had those two rows been ordered rows of one key, that key would be parked behind them.
    await t.db.query(`update outbox set ordered = true, partition_key = 'key-1' where status = 'dead'`);
    expect((await scrape(url)).get('herald_outbox_parked_keys{sink="amqp"}')).toBe(1);

    // The same message again (a relay that died between the confirm and the mark): a duplicate.
    broker.channel.sendToQueue(queue, Buffer.from(JSON.stringify({ index: 7 })), {
      messageId: seeded.messageIds[7],
      persistent: true,
    });
    await waitFor(async () => settled(await scrape(url), 'duplicate') === 1, {
      what: 'the duplicate counted',
    });

    const ready = await readiness(url);
    expect(ready.status).toBe(200);
    expect(ready.report.checks.map((c) => [c.name, c.ok])).toEqual([
      ['database', true],
      ['role:worker', true],
      ['consumers', true],
      ['role:relay', true],
      ['broker:amqp', true],
      ['broker:kafka', true], // the test services include Kafka: the relay has both sinks
    ]);
    expect(ready.report.checks.find((c) => c.name === 'broker:amqp')!.detail).toBe('connected');

    // The scanner over due campaigns, with the relay stopped: its claims wait in the outbox.
    await relay.stop();
    const campaigns = campaignService(t.db);
    for (let i = 0; i < 5; i++) {
      const created = await campaigns.create(lineCampaign());
      await campaigns.schedule(created.campaignId, await dbTimePlus(t.db, 200));
    }
    const beforeScan = await scrape(url);
    const scanner = await start(
      'scanner',
      scannerRole,
      t.config({ AMQP_URL: '', HERALD_SCANNER_POLL_MS: '1000' }), // no tick consumer: polls and timers only
      heraldRegistry,
    );
    expect(scanner.url).toBe(url);
    const claim = 'aggregate="campaign",sweeper="campaign.claim"';
    const scanned = await waitFor(
      async () => {
        const m = await scrape(url);
        return delta(m, beforeScan, `herald_sweeper_claims_total{${claim},outcome="claimed"}`) === 5
          ? m
          : null;
      },
      { what: 'five campaigns claimed' },
    );
    expect(delta(scanned, beforeScan, `herald_sweeper_due_to_claimed_seconds_count{${claim}}`)).toBe(5);
    const waited = delta(scanned, beforeScan, `herald_sweeper_due_to_claimed_seconds_sum{${claim}}`);
    expect(waited).toBeGreaterThanOrEqual(0);
    expect(waited / 5).toBeLessThan(5); // claimed within seconds of their start time
    expect(
      delta(scanned, beforeScan, `herald_sweeper_batch_duration_seconds_count{${claim}}`),
    ).toBeGreaterThanOrEqual(1);
    expect(scanned.get('herald_outbox_pending{sink="amqp"}')).toBe(5);

    // The last role to stop closes the endpoint.
    await Promise.all(running.splice(0).map((role) => role.stop()));
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it('/readyz goes 503 while the database is unreachable and back to 200 after; /healthz and /metrics keep answering', async () => {
    const target = new URL(t.url);
    const proxy = await TcpProxy.reserve({ host: target.hostname, port: Number(target.port) });
    await proxy.open();
    const queue = uniqueName('herald_test_ready');
    broker.adopt(queue);
    const config = t.config({
      DATABASE_URL: proxy.url(t.url),
      HERALD_READY_STARTUP_GRACE_SECONDS: '0',
      HERALD_PROJECTOR_LEASE_SECONDS: '3',
      HERALD_PROJECTOR_POLL_MS: '200',
    });
    try {
      const relay = await start('relay', relayRole, config, ledgerWithConsumer(queue, 'unused'));
      const projector = await start('projector', projectorRole, config, heraldRegistry);
      expect(projector.url).toBe(relay.url);
      const url = relay.url;
      const up = await waitFor(
        async () => {
          const r = await readiness(url);
          return r.status === 200 ? r : null;
        },
        { what: 'ready' },
      );
      expect(up.report.checks.map((c) => c.name)).toEqual([
        'database',
        'role:relay',
        'broker:amqp',
        'broker:kafka',
        'role:projector',
        'lease:projector:dispatch_stats',
        'projection:dispatch_stats',
        'projection:dispatch_stats/receipts',
      ]);

      await proxy.close();
      const down = await waitFor(
        async () => {
          const r = await readiness(url);
          return r.status === 503 ? r : null;
        },
        { what: 'not ready without the database' },
      );
      expect(down.report.ok).toBe(false);
      const database = down.report.checks.find((c) => c.name === 'database')!;
      expect(database.ok).toBe(false);
      expect(database.detail).toMatch(/^unreachable: /);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      const metrics = await scrape(url);
      expect(metrics.get('herald_metrics_database_up')).toBe(0);
      expect(metrics.has('herald_outbox_pending{sink="amqp"}')).toBe(false);
      expect(metrics.has('herald_relay_published_total{sink="amqp"}')).toBe(true); // in-process series stay

      await proxy.open();
      const back = await waitFor(
        async () => {
          const r = await readiness(url);
          return r.status === 200 ? r : null;
        },
        { what: 'ready again', timeoutMs: 30_000 },
      );
      expect(back.report.checks.every((c) => c.ok)).toBe(true);
      expect((await scrape(url)).get('herald_metrics_database_up')).toBe(1);
    } finally {
      await Promise.all(running.splice(0).map((role) => role.stop()));
      await proxy.close();
    }
  });

  it('/readyz goes 503 naming the lease when no projector renews it, and back to 200 when one does; /metrics shows lease age and lag', async () => {
    const config = t.config({
      HERALD_READY_STARTUP_GRACE_SECONDS: '0',
      HERALD_PROJECTOR_LEASE_SECONDS: '2',
      HERALD_PROJECTOR_POLL_MS: '200',
      HERALD_READY_MAX_LEASE_AGE_SECONDS: '2',
    });
    // Maintenance keeps the endpoint up while the projector is away.
    const maintenance = await start('maintenance', maintenanceRole, config, heraldRegistry);
    const url = maintenance.url;
    let projector = await start('projector', projectorRole, config, heraldRegistry);
    const leaseCheck = async () =>
      (await readiness(url)).report.checks.find((c) => c.name === 'lease:projector:dispatch_stats');
    await waitFor(async () => (await readiness(url)).status === 200, { what: 'ready with a projector' });
    const held = await scrape(url);
    expect(held.get('herald_lease_held{lease="projector:dispatch_stats"}')).toBe(1);
    expect(held.get('herald_lease_age_seconds{lease="projector:dispatch_stats"}')).toBeLessThan(2);
    // (Whether it reads 0 now depends on every transaction on the server: the projector reads only
    // below the cluster-wide xmin, and other test files run beside this one.)
    expect(held.get(LAG)).toBeGreaterThanOrEqual(0);

    await projector.stop(); // releases its lease; nobody renews it any more
    const stale = await waitFor(
      async () => {
        const r = await readiness(url);
        return r.status === 503 ? r : null;
      },
      { what: 'not ready: the lease went stale' },
    );
    expect(stale.report.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual([
      'lease:projector:dispatch_stats',
    ]);
    expect((await leaseCheck())!.detail).toMatch(/older than 2 s\): no replica holds it/);
    // An event written after the projector stopped is after its checkpoint: the lag is at least its
    // age, and grows by the database clock while no projector runs.
    await campaignService(t.db).create(lineCampaign());
    const lagging = await waitFor(
      async () => {
        const m = await scrape(url);
        return (m.get(LAG) ?? 0) > 0 ? m : null;
      },
      { what: 'projector lag visible' },
    );
    expect(lagging.get('herald_lease_held{lease="projector:dispatch_stats"}')).toBe(0);
    expect(lagging.get('herald_lease_age_seconds{lease="projector:dispatch_stats"}')).toBeGreaterThan(2);
    const lag = lagging.get(LAG)!;
    await waitFor(async () => ((await scrape(url)).get(LAG) ?? 0) > lag + 0.5, { what: 'the lag grows' });

    projector = await start('projector', projectorRole, config, heraldRegistry);
    await waitFor(async () => (await readiness(url)).status === 200, { what: 'ready again' });
    expect((await leaseCheck())!.ok).toBe(true);
  });

  it("a scanner's /readyz requires the SMS pollers' leases: one older than its threshold → 503 naming it; /metrics shows each lease's age", async () => {
    const config = t.config({
      AMQP_URL: '', // no tick consumer: polls and timers only
      HERALD_SCANNER_POLL_MS: '200',
      HERALD_READY_STARTUP_GRACE_SECONDS: '0',
      HERALD_READY_MAX_LEASE_AGE_SECONDS: '3',
      HERALD_READY_MAX_PROJECTION_LAG_SECONDS: '0',
      HERALD_SMS_LEASE_TTL_SECONDS: '1',
      HERALD_PROJECTOR_LEASE_SECONDS: '1',
      HERALD_PROJECTOR_POLL_MS: '200',
    });
    const scanner = await start('scanner', scannerRole, config, heraldRegistry);
    await start('projector', projectorRole, config, heraldRegistry);
    const url = scanner.url;
    const up = await waitFor(
      async () => {
        const r = await readiness(url);
        return r.status === 200 ? r : null;
      },
      { what: 'ready: the scanner holds its leases', timeoutMs: 30_000 },
    );
    const names = up.report.checks.map((c) => c.name);
    for (const lease of ['sms:dlr-rollup', 'sms:retry-dispatcher', 'sms:refund-retry']) {
      expect(names).toContain(`lease:${lease}`);
    }
    const fresh = await scrape(url);
    expect(fresh.get('herald_lease_held{lease="sms:dlr-rollup"}')).toBe(1);
    expect(fresh.get('herald_lease_age_seconds{lease="sms:dlr-rollup"}')).toBeLessThan(3);
    // An idle scanner keeps renewing (its timer is armed at a third of the TTL): still fresh later.
    await waitFor(
      async () =>
        (
          await t.db.query(
            `select 1 from lease where name = 'sms:dlr-rollup' and acquired_at < now() - interval '2 seconds'`,
          )
        ).rowCount === 1,
      { what: 'the lease held for 2 s' },
    );
    expect((await readiness(url)).status).toBe(200);

    // A holder that stopped renewing (paused, stuck) still holds it unexpired: nobody else may take it.
    await t.db.query(
      `update lease set owner = 'stuck-pod:1', term = term + 1, renewed_at = now(), expires_at = now() + interval '1 hour'
        where name = 'sms:dlr-rollup'`,
    );
    const stale = await waitFor(
      async () => {
        const r = await readiness(url);
        return r.status === 503 ? r : null;
      },
      { what: 'not ready: the roll-up lease went stale' },
    );
    expect(stale.report.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['lease:sms:dlr-rollup']);
    expect(stale.report.checks.find((c) => c.name === 'lease:sms:dlr-rollup')!.detail).toMatch(
      /by stuck-pod:1 \(older than 3 s\): its holder stopped renewing it/,
    );
    expect((await scrape(url)).get('herald_lease_age_seconds{lease="sms:dlr-rollup"}')).toBeGreaterThan(3);

    // It expires: the scanner takes it over (a new term) and readiness recovers.
    await t.db.query(`update lease set expires_at = now() where name = 'sms:dlr-rollup'`);
    await waitFor(async () => (await readiness(url)).status === 200, { what: 'ready again' });
    const { rows } = await t.db.query<{ owner: string }>(
      `select owner from lease where name = 'sms:dlr-rollup'`,
    );
    expect(rows[0]!.owner).not.toBe('stuck-pod:1');
  });

  it("/readyz follows the relay's broker connection: 503 once it is lost, 200 after the probe reconnected it", async () => {
    const amqp = new URL(process.env.AMQP_URL!);
    const proxy = await TcpProxy.reserve({ host: amqp.hostname, port: Number(amqp.port) });
    await proxy.open();
    const queue = uniqueName('herald_test_broker_ready');
    broker.adopt(queue);
    const config = t.config({
      AMQP_URL: proxy.url(process.env.AMQP_URL!),
      KAFKA_BROKERS: '',
      HERALD_READY_STARTUP_GRACE_SECONDS: '0',
      HERALD_READY_MAX_LEASE_AGE_SECONDS: '0',
      HERALD_READY_MAX_PROJECTION_LAG_SECONDS: '0',
    });
    const brokerCheck = async (url: string) => {
      const { status, report } = await readiness(url);
      return { status, check: report.checks.find((c) => c.name === 'broker:amqp') };
    };
    try {
      const { url } = await start('relay', relayRole, config, ledgerWithConsumer(queue, 'unused'));
      await waitFor(async () => (await brokerCheck(url)).check?.detail.startsWith('not connected yet'), {
        what: 'the sink is idle until its first publish',
      });
      expect((await brokerCheck(url)).status).toBe(200);
      await seedOutbox(t.db, { count: 3, destination: queue });
      await waitFor(async () => (await brokerCheck(url)).check?.detail === 'connected', {
        what: 'connected',
      });

      await proxy.close();
      const lost = await waitFor(
        async () => {
          const r = await brokerCheck(url);
          return r.status === 503 ? r : null;
        },
        { what: 'not ready: the connection is lost' },
      );
      expect(lost.check).toMatchObject({ ok: false });
      expect(lost.check!.detail).toMatch(/reconnecting/);

      await proxy.open(); // nothing to publish: the probe itself reconnects the sink
      await waitFor(
        async () => {
          const r = await brokerCheck(url);
          return r.status === 200 && r.check?.detail === 'connected';
        },
        { what: 'ready again without a publish', timeoutMs: 30_000 },
      );
    } finally {
      await Promise.all(running.splice(0).map((role) => role.stop()));
      await proxy.close();
    }
  });

  it('a port already in use stops the role with a ConfigError naming HERALD_METRICS_PORT', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const failed = runRole('maintenance', maintenanceRole, {
        config: t.config({ HERALD_METRICS_PORT: String(port) }),
        logger: testLogger(),
        registry: heraldRegistry,
        signal: new AbortController().signal,
      });
      const error = await failed.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe('HERALD_METRICS_PORT');
      expect((error as ConfigError).message).toContain(`port ${port} on 127.0.0.1 is already in use`);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});
