/**
 * Campaign dispatch benchmark: due → claimed → published, with the scanner and relay roles running as
 * separate processes (docs/benchmarks.md has results and how to read them).
 *
 *   npm run bench:dispatch -- [--scenario all|burst|spread] [--burst 10000] [--spread 1000]
 *                             [--window-ms 25000] [--scanners 2] [--relays 2] [--warm-up 100]
 *                             [--baseline-samples 300] [--trace] [--log-statements] [--dump <path prefix>]
 *
 *   baseline  one trivial transaction + one publish/confirm to a quorum queue, sampled while idle: the
 *             floor under due → published.
 *   burst     N campaigns due at the same instant: claims/s (claim transactions' database time) and
 *             due → published p50/p99.
 *   spread    N campaigns due at distinct milliseconds, uniformly at random over --window-ms, the roles
 *             idle between dues: due → published p50/p99 (goal: p99 ≤ 25 ms).
 *
 * Each scenario: a fresh database; `herald scanner` × --scanners and `herald relay` × --relays started
 * from source as child processes (the scanners without AMQP_URL, so they take no tick messages from the
 * shared process_campaign queue); drafts created and scheduled through CampaignService with start
 * times from the database clock far enough ahead that setup ends before the first due (setup is not
 * timed). --warm-up campaigns (not counted) fall due in the 3 s to 1 s before the measured ones, so the
 * roles are warm, as long-running pods are: the relays' broker connections open on their first publish
 * and the claim and publish code paths have run. Then it waits until every outbox row is sent, stops
 * the roles (SIGTERM, exit 0 expected) and reads every time from the database (invariant 6: the only
 * clock all processes share). The relays publish to the real LINE queues
 * (line_broadcast_rich_message / line_multicast_rich_message): the benchmark refuses to run while
 * anything consumes them, and purges them before and after each scenario.
 *
 * Profiling: --trace loads bench/support/dispatch-trace.ts into the role processes and prints where
 * due → published goes, stage by stage (bench/support/dispatch-stages.ts); --log-statements sends every
 * statement on the scenario's database to the PostgreSQL server log (durations, for profiling);
 * --dump writes each campaign's times and ids to <prefix>.<scenario>.json.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';
import {
  baseline,
  type ClaimTransaction,
  campaignTimes,
  checkClaims,
  claimsPerSecond,
  claimTransactions,
  type Distribution,
  describe,
  dispatchTimes,
  distribution,
  ms,
  waitForSent,
} from './support/dispatch-measure.js';
import { type RoleProcess, startRoles, stopRoles } from './support/dispatch-roles.js';
import {
  campaignService,
  createDrafts,
  databaseNowMs,
  distinctOffsets,
  scheduleAll,
  sharedQueues,
} from './support/dispatch-setup.js';
import { formatStages, readTraces, stageReport } from './support/dispatch-stages.js';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'all' },
    burst: { type: 'string', default: '10000' },
    spread: { type: 'string', default: '1000' },
    'window-ms': { type: 'string', default: '25000' },
    scanners: { type: 'string', default: '2' },
    relays: { type: 'string', default: '2' },
    'baseline-samples': { type: 'string', default: '300' },
    'warm-up': { type: 'string', default: '100' },
    'log-statements': { type: 'boolean', default: false },
    dump: { type: 'string' },
    trace: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run bench:dispatch -- [--scenario all|burst|spread] [--burst 10000] [--spread 1000] ' +
      '[--window-ms 25000] [--scanners 2] [--relays 2] [--warm-up 100] [--baseline-samples 300] ' +
      '[--trace] [--log-statements] [--dump <path prefix>]\n(see bench/dispatch.bench.ts and docs/benchmarks.md)\n',
  );
  process.exit(0);
}
const scenario = values.scenario!;
if (!['all', 'burst', 'spread'].includes(scenario))
  throw new Error(`--scenario ${scenario}: all|burst|spread`);
const counts = { scanners: Number(values.scanners), relays: Number(values.relays) };
const amqpUrl = requireEnv('AMQP_URL');
const queueType = process.env.HERALD_AMQP_QUEUE_TYPE === 'classic' ? 'classic' : 'quorum';
/** Concurrent API calls while creating and scheduling campaigns (setup only). */
const SETUP_CONCURRENCY = 16;

const log = (line: string) => process.stdout.write(`${line}\n`);
const summary: string[] = [];

/** What a LINE dispatch message's body looks like (for the baseline's publish). */
const SAMPLE_BODY = JSON.stringify({
  campaignId: '6b0f7a2e-4c1d-4f3b-9a55-2f0c8d1e7b90',
  audienceId: 'aud-12345',
  organizationId: 'org-12',
  lineOaId: 'oa-42',
  castType: 'multicast',
  epoch: 1,
});

interface ScenarioResult {
  dueToSent: Distribution;
  dueToClaim: Distribution;
  claimToSent: Distribution;
  transactions: ClaimTransaction[];
  firstDueMs: number;
  lastDueMs: number;
  lastSentAfterDueMs: number;
}

/** Warm-up campaigns are due in this window before the measured ones (ending 1 s before them). */
const WARM_UP_WINDOW_MS = 2_000;

/**
 * One scenario on a fresh database: start the roles; create `warmUp` + `n` drafts; schedule the
 * warm-up ones at distinct ms in the 3 s to 1 s before `base` and the measured ones at
 * base + dueOffsets (base = database now + a lead covering the scheduling); wait until all are
 * published; stop the roles; read the times of the measured ones.
 */
async function runScenario(
  name: string,
  n: number,
  dueOffsets: (n: number) => number[],
): Promise<ScenarioResult> {
  const warmUp = Number(values['warm-up']);
  const queues = await sharedQueues(amqpUrl, queueType);
  const database = await createTestDatabase();
  const { service, close } = campaignService(database.db, database.config().notifyCoalesceMs);
  let roles: RoleProcess[] = [];
  const traceDirectory = values.trace ? mkdtempSync(join(tmpdir(), `herald-dispatch-${name}-`)) : undefined;
  try {
    if (values['log-statements']) {
      const dbName = new URL(database.url).pathname.slice(1);
      await database.db.query(`alter database "${dbName}" set log_min_duration_statement = 0`);
      log(`${name}: every statement on database ${dbName} goes to the PostgreSQL server log`);
    }
    await queues.requireNoConsumers();
    const stale = await queues.purge();
    if (stale > 0) log(`${name}: purged ${stale} messages left in the LINE queues`);
    roles = await startRoles(counts, {
      databaseUrl: database.url,
      schema: database.schema,
      amqpUrl,
      ...(traceDirectory ? { traceDirectory } : {}),
    });

    const createStarted = performance.now();
    const warmUpIds = await createDrafts(service, warmUp, SETUP_CONCURRENCY, { warmUp: true });
    const ids = await createDrafts(service, n, SETUP_CONCURRENCY);
    const createMs = performance.now() - createStarted;
    // Scheduling takes about as long as creating did (up to 1.7 times as long was seen on a busy
    // machine); the first due comes after it, with room to spare.
    const offsets = dueOffsets(n);
    const warmUpOffsets = distinctOffsets(warmUp, WARM_UP_WINDOW_MS).map(
      (o) => o - WARM_UP_WINDOW_MS - 1_000,
    );
    const base = Math.ceil(
      (await databaseNowMs(database.db)) + createMs * 2.5 + 3_000 + WARM_UP_WINDOW_MS + 1_000,
    );
    const measured = ids.map((campaignId, i) => ({ campaignId, startAtMs: base + offsets[i]! }));
    const schedule = [
      ...warmUpIds.map((campaignId, i) => ({ campaignId, startAtMs: base + warmUpOffsets[i]! })),
      ...measured,
    ];
    const scheduleStarted = performance.now();
    await scheduleAll(service, schedule, SETUP_CONCURRENCY);
    const scheduleMs = performance.now() - scheduleStarted;
    const firstDueMs = Math.min(...measured.map((s) => s.startAtMs));
    const lastDueMs = Math.max(...measured.map((s) => s.startAtMs));
    const spare = Math.min(...schedule.map((s) => s.startAtMs)) - (await databaseNowMs(database.db));
    log(
      `${name}: setup ${warmUp} warm-up + ${n} drafts in ${Math.round(createMs)} ms, scheduled in ` +
        `${Math.round(scheduleMs)} ms; first warm-up due in ${Math.round(spare)} ms; measured dues over ` +
        `${lastDueMs - firstDueMs} ms; ${counts.scanners} scanner + ${counts.relays} relay processes`,
    );
    if (spare < 500) throw new Error(`${name}: setup ran into the first due (${Math.round(spare)} ms left)`);

    // Someone starting to consume the LINE queues mid-run (the serial tests) would get the benchmark's
    // messages: stop instead of feeding them more.
    await waitForSent(database.db, warmUp + n, lastDueMs - Date.now() + 120_000, () =>
      queues.requireNoConsumers(),
    );
    await stopRoles(roles);
    for (const role of roles) for (const problem of role.problems) log(`  ${problem}`);
    roles = [];

    await checkClaims(database.db, warmUp + n);
    const times = await dispatchTimes(database.db);
    const lines = await queues.inspect();
    const inQueues = Object.values(lines).reduce((sum, q) => sum + q.messages, 0);
    const consumers = Object.values(lines).reduce((sum, q) => sum + q.consumers, 0);
    log(`${name}: ${warmUp + n} campaigns claimed once each; ${inQueues} messages in the LINE queues`);
    if (inQueues !== warmUp + n || consumers > 0) {
      log(
        `${name}: WARNING: something consumed the LINE queues during the run (${consumers} consumers now); ` +
          'the figures stand (published = marked sent after the confirm), but whoever it was got these messages',
      );
    }
    if (values.dump || traceDirectory) {
      const campaigns = await campaignTimes(database.db);
      if (values.dump) {
        writeFileSync(`${values.dump}.${name}.json`, JSON.stringify(campaigns));
        log(`${name}: per-campaign times written to ${values.dump}.${name}.json`);
      }
      if (traceDirectory) {
        for (const line of formatStages(stageReport(readTraces(traceDirectory), campaigns)))
          log(`${name}: ${line}`);
      }
    }
    const { rows } = await database.db.query<{ last_sent_ms: number }>(
      'select (extract(epoch from max(sent_at)) * 1000)::float8 as last_sent_ms from outbox',
    );
    return {
      dueToSent: distribution(times.dueToSent),
      dueToClaim: distribution(times.dueToClaim),
      claimToSent: distribution(times.claimToSent),
      transactions: await claimTransactions(database.db),
      firstDueMs,
      lastDueMs,
      lastSentAfterDueMs: rows[0]!.last_sent_ms - lastDueMs,
    };
  } finally {
    if (roles.length > 0) {
      await stopRoles(roles).catch(() => {});
      for (const role of roles) for (const problem of role.problems.slice(0, 20)) log(`  ${problem}`);
    }
    close();
    if (traceDirectory) rmSync(traceDirectory, { recursive: true, force: true });
    await queues.purge().catch(() => {});
    await queues.close();
    await database.drop();
  }
}

async function runBaseline(): Promise<Distribution> {
  const database = await createTestDatabase({ migrate: false });
  try {
    const samples = await baseline({
      db: database.db,
      amqpUrl,
      queue: uniqueName('herald_bench_baseline'),
      queueType,
      samples: Number(values['baseline-samples']),
      gapMs: 20,
      body: SAMPLE_BODY,
    });
    const total = distribution(samples.total);
    log(`baseline: transaction ${describe(distribution(samples.transaction))}`);
    log(`baseline: publish+confirm (${queueType}) ${describe(distribution(samples.publish))}`);
    log(`baseline: both ${describe(total)}`);
    summary.push(
      `baseline p50=${ms(total.p50)} p99=${ms(total.p99)} (ms: one trivial transaction + one publish/confirm)`,
    );
    return total;
  } finally {
    await database.drop();
  }
}

/** Claims per scanner: "bench-scanner-1: 12 tx / 5000 claims, …". */
function perPod(transactions: readonly ClaimTransaction[]): string {
  const pods = new Map<string, { tx: number; claims: number }>();
  for (const t of transactions) {
    const pod = pods.get(t.pod) ?? { tx: 0, claims: 0 };
    pod.tx++;
    pod.claims += t.claims;
    pods.set(t.pod, pod);
  }
  return [...pods].map(([pod, c]) => `${pod}: ${c.tx} tx / ${c.claims} claims`).join(', ');
}

const ratio = (value: number, floor: number) => `${(value / floor).toFixed(1)}x`;

const floor = await runBaseline();

if (scenario === 'all' || scenario === 'burst') {
  const n = Number(values.burst);
  const r = await runScenario('burst', n, (count) => new Array<number>(count).fill(0));
  const perSecond = claimsPerSecond(r.transactions);
  const rate = Number.isNaN(perSecond) ? 'n/a' : String(Math.round(perSecond));
  const first = r.transactions[0]!;
  const last = r.transactions[r.transactions.length - 1]!;
  log(
    `burst: ${r.transactions.length} claim transactions (${perPod(r.transactions)}); ` +
      `due → first claim ${ms(first.at_ms - r.firstDueMs)} ms, due → last claim ${ms(last.at_ms - r.firstDueMs)} ms, ` +
      `due → last published ${ms(r.lastSentAfterDueMs)} ms`,
  );
  log(`burst: due → claimed ${describe(r.dueToClaim)}`);
  log(`burst: claimed → published ${describe(r.claimToSent)}`);
  log(`burst: due → published ${describe(r.dueToSent)}`);
  summary.push(
    `burst claims/s=${rate} p50=${ms(r.dueToSent.p50)} p99=${ms(r.dueToSent.p99)} ` +
      `(ms, due → published, n=${n}; p50 ${ratio(r.dueToSent.p50, floor.p50)} baseline)`,
  );
}

if (scenario === 'all' || scenario === 'spread') {
  const n = Number(values.spread);
  const windowMs = Number(values['window-ms']);
  const r = await runScenario('spread', n, (count) => distinctOffsets(count, windowMs));
  log(`spread: due → claimed ${describe(r.dueToClaim)}`);
  log(`spread: claimed → published ${describe(r.claimToSent)}`);
  log(`spread: due → published ${describe(r.dueToSent)}`);
  summary.push(
    `spread p50=${ms(r.dueToSent.p50)} p99=${ms(r.dueToSent.p99)} ` +
      `(ms, due → published, n=${n} over ${windowMs} ms; p50 ${ratio(r.dueToSent.p50, floor.p50)}, ` +
      `p99 ${ratio(r.dueToSent.p99, floor.p99)} baseline; goal p99 ≤ 25: ${r.dueToSent.p99 <= 25 ? 'met' : 'missed'})`,
  );
}

log('');
for (const line of summary) log(line);
