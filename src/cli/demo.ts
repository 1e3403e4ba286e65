/**
 * `npm run demo`: Herald's main job end to end on locally started services. It creates a fresh
 * demo database, runs every role in this process (relay, scanner, worker), creates a handful of
 * campaigns (broadcast and multicast due in a few seconds, one sent now, one cancelled, one paused
 * then resumed), shows them move, and prints the final statuses, the deliveries and one campaign's
 * event history; then scheduled actions (demo-actions.ts), cron jobs (demo-cron.ts) and SMS campaigns
 * (demo-sms.ts: an inline and a CSV campaign through Kafka and the SMS simulator). The HTTP API is up
 * for the whole run (demo-api.ts: its URL and a key are printed; one campaign is scheduled through it).
 * Exits 0 when every campaign reached its expected final state.
 */
import { recreateDatabase } from '../adapters/postgres/admin.js';
import { countLineDeliveries } from '../adapters/postgres/line-delivery-queries.js';
import { migrate } from '../adapters/postgres/migrator.js';
import { CampaignService } from '../aggregates/campaign/service.js';
import { heraldRegistry } from '../aggregates/registry.js';
import { loadConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { relayRole } from '../roles/relay-role.js';
import { scannerRole } from '../roles/scanner-role.js';
import { workerRole } from '../roles/worker-role.js';
import { createRuntime, runRole, runTogether } from '../runtime/runtime.js';
import { runActionsDemo } from './demo-actions.js';
import { type DemoApi, holdDemoApi, scheduleThroughApi, startDemoApi } from './demo-api.js';

const DEMO_DATABASE = 'herald_demo';
const out = (line = '') => process.stdout.write(`${line}\n`);

async function main(): Promise<number> {
  const base = loadConfig(process.env);
  const databaseUrl = await recreateDatabase(base.databaseUrl, DEMO_DATABASE);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: databaseUrl,
    HERALD_LOG_LEVEL: process.env.HERALD_LOG_LEVEL ?? 'warn',
    HERALD_POD: 'demo',
    // The cron section's job targets are HTTP servers it starts on 127.0.0.1.
    HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true',
    // The SMS section: the relay creates the submit topic; the promotional (BTRC) window is opened all
    // day so the demo dispatches whatever the time in Dhaka (default 09:00-21:00).
    HERALD_KAFKA_CREATE_TOPICS: process.env.HERALD_KAFKA_CREATE_TOPICS ?? 'true',
    HERALD_SMS_PROMOTIONAL_WINDOW: process.env.HERALD_SMS_PROMOTIONAL_WINDOW ?? '00:00:00-23:59:59',
    // Retries after about a second instead of five minutes, so the demo shows a number exhausting its
    // attempts while it runs.
    HERALD_SMS_RETRY_MINUTES: process.env.HERALD_SMS_RETRY_MINUTES ?? '0',
    HERALD_SMS_RETRY_JITTER_SECONDS: process.env.HERALD_SMS_RETRY_JITTER_SECONDS ?? '1',
  });
  out(`Herald demo: database ${DEMO_DATABASE}, broker ${new URL(config.amqpUrl ?? 'amqp://unset').host}`);
  const migrated = await migrate({ url: config.databaseUrl, schema: config.schema });
  out(`migrations applied: ${migrated.applied.join(', ')}`);

  const logger = createLogger({ level: config.logLevel, pod: config.pod, secrets: config.secrets });
  const controller = new AbortController();
  const context = { config, logger, registry: heraldRegistry };
  const roles = runTogether(controller.signal, [
    (signal) => runRole('relay', relayRole, { ...context, signal }),
    (signal) => runRole('scanner', scannerRole, { ...context, signal }),
    (signal) => runRole('worker', workerRole, { ...context, signal }),
  ]);
  roles.catch(() => controller.abort()); // a failed role ends the demo (the error surfaces below)
  const runtime = createRuntime(config, logger, { registry: heraldRegistry, applicationName: 'herald-demo' });
  const campaigns = new CampaignService({ db: runtime.db, handler: runtime.handler });
  let api: DemoApi | undefined;
  try {
    const { rows } = await runtime.db.query<{ now: Date }>('select now() as now');
    const now = rows[0]!.now.getTime();
    const at = (seconds: number) => new Date(now + seconds * 1000);
    const org = 'org-demo';
    api = await startDemoApi(runtime, org, out);
    const made: { label: string; id: string; expected: string }[] = [];
    const create = async (label: string, castType: 'broadcast' | 'multicast', expected: string) => {
      const c = await campaigns.create(
        {
          mode: 'draft',
          organizationId: org,
          channel: 'line',
          castType,
          audienceId: castType === 'multicast' ? `audience-${made.length + 1}` : null,
          lineOaId: 'oa-demo',
          name: label,
        },
        { actor: 'demo', correlationId: `demo-${made.length + 1}` },
      );
      made.push({ label, id: c.campaignId, expected });
      return c.campaignId;
    };

    const b1 = await create('spring sale broadcast', 'broadcast', 'COMPLETED');
    await campaigns.schedule(b1, at(3));
    const b2 = await create('weekly digest broadcast', 'broadcast', 'COMPLETED');
    await campaigns.schedule(b2, at(4), at(60));
    const m1 = await create('vip multicast', 'multicast', 'COMPLETED');
    await campaigns.schedule(m1, at(3.5));
    const m2 = await create('cart reminder multicast', 'multicast', 'COMPLETED');
    await campaigns.schedule(m2, at(5));
    const now1 = await create('flash alert (send now)', 'broadcast', 'COMPLETED');
    await campaigns.sendNow(now1); // DRAFT → DISPATCHING in one transaction, no scanner involved
    const cancelled = await create('retracted promo (cancelled)', 'multicast', 'CANCELLED');
    await campaigns.schedule(cancelled, at(4));
    await campaigns.cancel(cancelled, 'wrong audience');
    const paused = await create('paused then resumed', 'multicast', 'COMPLETED');
    await campaigns.schedule(paused, at(6));
    await campaigns.pause(paused);
    out(`created ${made.length} campaigns; paused "${made.at(-1)!.label}"`);
    await campaigns.resume(paused);
    out(`resumed "${made.at(-1)!.label}"`);
    made.push({
      label: 'api campaign (Idempotency-Key)',
      id: await scheduleThroughApi(api, at(4.5), out),
      expected: 'COMPLETED',
    });
    out('waiting for dispatch…');
    out();

    const deadline = Date.now() + 60_000;
    let last = '';
    for (;;) {
      const states = await Promise.all(made.map((m) => campaigns.get(m.id)));
      const line = states.map((s, i) => `${made[i]!.label.split(' ')[0]}=${s.status}`).join('  ');
      if (line !== last) {
        out(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
        last = line;
      }
      if (states.every((s, i) => s.status === made[i]!.expected)) break;
      if (Date.now() > deadline) {
        out('demo: timed out waiting for the campaigns to finish');
        return 1;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    out();
    out('final statuses (deliveries recorded by the LINE delivery port):');
    const deliveries = await countLineDeliveries(
      runtime.db,
      made.map((m) => m.id),
    );
    for (const m of made) {
      const s = await campaigns.get(m.id);
      const lag =
        s.startAt && s.status === 'COMPLETED'
          ? ` (start ${s.startAt.slice(11, 23)}, claimed epoch ${s.claimEpoch})`
          : '';
      out(`  ${m.label.padEnd(30)} ${s.status.padEnd(10)} deliveries=${deliveries.get(m.id) ?? 0}${lag}`);
    }
    out();
    out(`event history of "${made[0]!.label}" (${b1}):`);
    for (const e of await campaigns.history(b1)) {
      const actor = e.meta.actor ? ` by ${e.meta.actor}` : '';
      out(
        `  v${e.version} ${e.recordedAt.toISOString().slice(11, 23)} ${e.type}${actor} ${JSON.stringify(e.data)}`,
      );
    }
    const { rows: outbox } = await runtime.db.query<{ status: string; n: number }>(
      'select status, count(*)::int as n from outbox group by status order by status',
    );
    out();
    out(`outbox: ${outbox.map((r) => `${r.status}=${r.n}`).join(' ')}`);
    if (!(await runActionsDemo({ runtime, config, out }))) return 1;
    const { runCronDemo } = await import('./demo-cron.js');
    if (!(await runCronDemo({ runtime, config, out }))) return 1;
    const { runSmsDemo } = await import('./demo-sms.js');
    if (!(await runSmsDemo({ runtime, config, out }))) return 1;
    out('demo complete: every campaign reached its expected status, each delivered campaign exactly once');
    await holdDemoApi(api, config.api.demoHoldMs, out);
    return 0;
  } finally {
    await api?.close();
    controller.abort();
    await roles;
    await runtime.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`demo failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
