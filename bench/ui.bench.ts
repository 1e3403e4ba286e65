/**
 * `npm run bench:ui`: the dashboard's API calls on a big database (issue 14; docs/benchmarks.md has
 * results and how to read them).
 *
 *   npm run bench:ui -- [--campaigns 100000] [--events 1000000] [--connections 10] [--seconds 5]
 *
 * Seeds a fresh database with set-based SQL (not timed): N campaign streams of five events with their
 * state rows, all of one organization (bench/support/seed-campaign-streams.ts), filler events up to the
 * event total, 200,000 SMS recipients (each number in four campaigns), an outbox row per campaign claim
 * (all but 7,000 sent, 5,000 pending, 2,000 dead), 5,000 publish receipts in the last hour, 24 hours of
 * dispatch_stats, 100,000 scheduled actions and 100,000 runs of one cron job. Then starts `herald api`
 * (the real CLI) as a child process and drives every call a dashboard page makes with autocannon
 * (each warmed up 1 s), with GET /healthz of the same server as the same-run baseline, and prints
 * p50 / p99 / req/s per call. The target is p99 < 100 ms; the bench reports, it does not assert (it
 * fails only on non-2xx answers).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { createApiKey } from '../src/api/auth.js';
import { createTestDatabase, freePort } from '../test/support/services.js';
import { seedCampaignStreams } from './support/seed-campaign-streams.js';

const { values } = parseArgs({
  options: {
    campaigns: { type: 'string', default: '100000' },
    events: { type: 'string', default: '1000000' },
    connections: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '5' },
    /** Keep the seeded database (its URL is printed) to EXPLAIN the calls afterwards. */
    keep: { type: 'boolean', default: false },
  },
});
const campaigns = Number(values.campaigns);
const totalEvents = Number(values.events);
const connections = Number(values.connections);
const seconds = Number(values.seconds);
const log = (line: string) => process.stdout.write(`${line}\n`);
const ORG = 'org-bench';

/** The seed, after seedCampaignStreams: one organization owns every campaign; varied statuses. */
const SEED = [
  `update campaign set organization_id = '${ORG}',
          status = case when (id::text < '1') then 'SCHEDULED' when (id::text < '2') then 'DRAFT'
                        when (id::text < '3') then 'CANCELLED' else status end`,
  // Filler events of another stream type, up to the event total (10 per stream).
  `insert into event (stream_type, stream_id, version, type, data, meta, recorded_at)
   select 'bench_filler', (g / 10)::text, g % 10 + 1, 'Filler', jsonb_build_object('n', g), '{}'::jsonb,
          timestamptz '2026-01-01' + make_interval(secs => g)
     from generate_series(0, $1::int - 1) g`,
  // 200,000 SMS recipients on the first 20,000 campaigns (10 each); each number is in 4 campaigns.
  `insert into campaign_recipient (campaign_id, msisdn, operator, timezone, content, encoding, segments, lang,
                                   sender, route_channel, mno_user, rate, cost, status)
   select c.id, '88017' || lpad(((c.n * 10 + r) % 50000)::text, 8, '0'), 'GP', 'Asia/Dhaka', 'hello', 'GSM7', 1,
          'en', 'HERALD', 'http', 'bench', 0.25, 0.25, 'SUBMITTED'
     from (select id, row_number() over (order by id) as n from campaign order by id limit 20000) c,
          generate_series(0, 9) r`,
  // Outbox rows of the organization, caused by the campaigns' claim events: sent, pending, dead.
  `insert into outbox (message_id, event_position, sink, destination, payload, status, attempts, created_at,
                       sent_at, dead_at, last_error, organization_id, next_attempt_at)
   select gen_random_uuid(), e.position, 'amqp',
          case when e.n % 2 = 0 then 'line_broadcast_rich_message' else 'line_multicast_rich_message' end,
          jsonb_build_object('campaignId', e.stream_id),
          case when e.n <= $1::int - 7000 then 'sent' when e.n <= $1::int - 2000 then 'pending' else 'dead' end,
          case when e.n > $1::int - 2000 then 5 else 1 end,
          now() - make_interval(secs => 200000 - e.n),
          case when e.n <= $1::int - 7000 then now() - make_interval(secs => 200000 - e.n) end,
          case when e.n > $1::int - 2000 then now() end,
          case when e.n > $1::int - 2000 then 'bench: unroutable' end,
          '${ORG}', now()
     from (select position, stream_id, row_number() over (order by position) as n
             from event where stream_type = 'campaign' and type = 'CampaignClaimed'
            order by position) e`,
  // Publish receipts of the last hour (the overview's latency series).
  `insert into publish_receipt (message_id, outbox_id, event_position, sink, destination, outcome, attempts,
                                recovery_count, confirmed_at, recorded_at)
   select o.message_id, o.id, o.event_position, o.sink, o.destination, 'sent', 1, 0,
          now() - make_interval(secs => (o.id % 3600)::int), now() - make_interval(secs => (o.id % 3600)::int)
     from outbox o where o.status = 'sent' order by o.id desc limit 5000`,
  `insert into dispatch_stats (hour, organization_id, destination, claimed, published, delivered)
   select date_trunc('hour', now()) - make_interval(hours => h), '${ORG}', d, 1000 + h, 990 + h, 980 + h
     from generate_series(0, 23) h, unnest(array['line_broadcast_rich_message', 'line_multicast_rich_message']) d`,
  // 100,000 scheduled actions: pending, waiting for a signal, done.
  `insert into scheduled_action (id, organization_id, mode, action_type, action_config, status, execute_at,
                                 expires_at, wait, correlation_key, max_retries, retry_count, fired_now, expired,
                                 due_because, claim_epoch, created_at, status_changed_at, version)
   select gen_random_uuid(), '${ORG}', case when g % 3 = 0 then 'waitForSignal' else 'normal' end, 'noop', '{}',
          case when g % 5 = 0 then 'done' else 'pending' end,
          now() + make_interval(secs => g), case when g % 3 = 0 then now() + make_interval(secs => g + 3600) end,
          case when g % 3 = 0 then jsonb_build_object('names', jsonb_build_array('clicked'), 'correlationKey', 'order-' || g) end,
          case when g % 3 = 0 then 'order-' || g end, 3, 0, false, false, 'due', 0, now(), now(), 1
     from generate_series(1, 100000) g`,
  'vacuum (analyze) campaign',
  'vacuum (analyze) campaign_recipient',
  'vacuum (analyze) outbox',
  'vacuum (analyze) scheduled_action',
  'vacuum (analyze) event',
  'vacuum (analyze) publish_receipt',
];

/** 100,000 runs of one job, one a minute back from now: completed, with a failure every tenth. */
const SEED_RUNS = `
  insert into job_run (id, job_id, organization_id, job_type, scheduled_for, trigger, trigger_key, fate, status,
                       attempts, max_attempts, retry, overlap, claim_epoch, started_at, finished_at,
                       response_status, output, error, duration_ms, created_at, updated_at, version)
  select gen_random_uuid(), $1::uuid, '${ORG}', 'ping', date_trunc('minute', now()) - make_interval(mins => g),
         'schedule', '', case when g % 50 = 0 then 'missed' else 'fired' end,
         case when g % 50 = 0 then 'missed' when g % 10 = 0 then 'permanently_failed' else 'completed' end,
         1, 4, '{"maxRetries": 3, "delayMs": 1000, "maxDelayMs": 60000}', 'skip', 1,
         now() - make_interval(mins => g), now() - make_interval(mins => g), 200, 'ok',
         case when g % 10 = 0 then 'bench: 500' end, 12, now(), now(), 3
    from generate_series(1, 100000) g;
  `;

function child(args: string[], env: NodeJS.ProcessEnv): { process: ChildProcess; output: () => string } {
  const proc = spawn('node', ['--import', 'tsx', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  proc.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  return { process: proc, output: () => output };
}

async function until(probe: () => Promise<boolean>, what: string, output: () => string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if (await probe()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface Row {
  page: string;
  call: string;
  p50: number;
  p99: number;
  rps: number;
}

async function main() {
  const database = await createTestDatabase();
  const port = await freePort();
  const env = {
    ...process.env,
    DATABASE_URL: database.url,
    HERALD_SCHEMA: database.schema,
    HERALD_LOG_LEVEL: 'warn',
    HERALD_API_PORT: String(port),
    HERALD_METRICS_PORT: '0',
  };
  const api = child(['src/main.ts', 'api'], env);
  try {
    const db = database.db;
    const t = Date.now();
    log(`setup: ${campaigns} campaigns × 5 events, filler up to ${totalEvents} events`);
    await seedCampaignStreams(db, campaigns);
    for (const [index, statement] of SEED.entries()) {
      const params =
        index === 1 ? [Math.max(0, totalEvents - campaigns * 5)] : index === 3 ? [campaigns] : [];
      await db.query(statement, params);
    }
    const url = `http://127.0.0.1:${port}`;
    await until(async () => (await fetch(`${url}/healthz`)).ok, 'herald api', api.output);
    const { key } = await createApiKey(db, { organizationId: ORG, role: 'operator', createdBy: 'bench' });
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const job = await fetch(`${url}/v1/cron-jobs`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        name: 'bench job',
        schedule: '* * * * *',
        timezone: 'Europe/Berlin',
        jobType: 'ping',
        payload: { url: 'https://example.com/health' },
      }),
    });
    if (job.status !== 201) throw new Error(`cron job: ${job.status} ${await job.text()}`);
    const jobId = ((await job.json()) as { jobId: string }).jobId;
    await db.query(SEED_RUNS, [jobId]);
    await db.query('vacuum (analyze) job_run');
    const counts = (
      await db.query<Record<string, number>>(
        `select (select count(*) from campaign)::int as campaigns, (select count(*) from event)::int as events,
                (select count(*) from campaign_recipient)::int as recipients, (select count(*) from outbox)::int as outbox,
                (select count(*) from scheduled_action)::int as actions, (select count(*) from job_run)::int as runs,
                (pg_database_size(current_database()) / 1048576)::int as mb`,
      )
    ).rows[0]!;
    log(`setup: ${JSON.stringify(counts)} in ${((Date.now() - t) / 1000).toFixed(1)} s`);

    // Ids the detail pages open: a campaign in the middle, its claim's outbox row.
    const campaignId = (
      await db.query<{ id: string }>('select id::text from campaign order by created_at offset $1 limit 1', [
        Math.floor(campaigns / 2),
      ])
    ).rows[0]!.id;
    const firstPage = (await (await fetch(`${url}/v1/campaigns?limit=50`, { headers: auth })).json()) as {
      nextCursor: string;
    };
    const msisdn = '+8801700000042';
    const sixHoursAgo = encodeURIComponent(new Date(Date.now() - 6 * 3_600_000).toISOString());

    const calls: [page: string, call: string, path: string][] = [
      ['baseline', 'GET /healthz', '/healthz'],
      ['sign-in', 'GET /v1/session (no cookie: 401)', '/v1/session'],
      ['overview', 'GET /v1/overview', '/v1/overview'],
      ['campaigns', 'GET /v1/campaigns', '/v1/campaigns?limit=50'],
      [
        'campaigns',
        'GET /v1/campaigns (2nd page, cursor)',
        `/v1/campaigns?limit=50&cursor=${firstPage.nextCursor}`,
      ],
      ['campaigns', 'GET /v1/campaigns?status=SCHEDULED', '/v1/campaigns?limit=50&status=SCHEDULED'],
      [
        'campaigns',
        'GET /v1/campaigns?channel=line&status=DRAFT',
        '/v1/campaigns?limit=50&channel=line&status=DRAFT',
      ],
      [
        'campaigns',
        'GET /v1/campaigns?q=<name prefix, 1,111 hits>',
        '/v1/campaigns?limit=50&q=bench%20campaign%2012',
      ],
      [
        'campaigns',
        'GET /v1/campaigns?q=<name prefix, 1 hit>',
        '/v1/campaigns?limit=50&q=bench%20campaign%2099999',
      ],
      ['campaigns', 'GET /v1/campaigns?q=<id>', `/v1/campaigns?limit=50&q=${campaignId}`],
      [
        'campaigns',
        'GET /v1/campaigns?createdFrom&createdTo',
        `/v1/campaigns?limit=50&createdFrom=2026-01-01T10:00:00Z&createdTo=2026-01-01T12:00:00Z`,
      ],
      ['campaign detail', 'GET /v1/campaigns/{id}', `/v1/campaigns/${campaignId}`],
      ['campaign detail', 'GET /v1/campaigns/{id}/timeline', `/v1/campaigns/${campaignId}/timeline`],
      ['recipients', 'GET /v1/recipients?msisdn=', `/v1/recipients?msisdn=${encodeURIComponent(msisdn)}`],
      ['actions', 'GET /v1/actions?status=pending', '/v1/actions?limit=50&status=pending'],
      [
        'actions',
        'GET /v1/actions?status=pending&mode=waitForSignal',
        '/v1/actions?limit=50&status=pending&mode=waitForSignal',
      ],
      ['actions', 'GET /v1/signals?correlationKey=', '/v1/signals?correlationKey=order-3'],
      ['cron', 'GET /v1/cron-jobs', '/v1/cron-jobs'],
      ['cron', 'GET /v1/cron-jobs/{id}', `/v1/cron-jobs/${jobId}`],
      ['cron', 'GET /v1/cron-jobs/{id}/runs', `/v1/cron-jobs/${jobId}/runs`],
      ['cron', 'GET /v1/cron-jobs/{id}/ledger', `/v1/cron-jobs/${jobId}/ledger`],
      [
        'cron',
        'GET /v1/cron-jobs/{id}/ledger (last 6 h)',
        `/v1/cron-jobs/${jobId}/ledger?from=${sixHoursAgo}&limit=1000`,
      ],
      ['cron', 'GET /v1/cron-jobs/{id}/upcoming', `/v1/cron-jobs/${jobId}/upcoming`],
      ['outbox', 'GET /v1/outbox/pending', '/v1/outbox/pending?limit=50'],
      ['outbox', 'GET /v1/outbox/dead', '/v1/outbox/dead?limit=50'],
      ['outbox', 'GET /v1/outbox/parked', '/v1/outbox/parked?limit=50'],
      ['overview', 'GET /v1/stats', '/v1/stats'],
    ];
    log(`bench:ui: ${connections} connections, ${seconds} s per call (1 s warm-up each)`);
    const rows: Row[] = [];
    for (const [page, call, path] of calls) {
      const expected = path === '/v1/session' ? 401 : 200;
      const probe = await fetch(`${url}${path}`, { headers: auth });
      if (probe.status !== expected) throw new Error(`${call}: ${probe.status} ${await probe.text()}`);
      const options = { url: `${url}${path}`, connections, headers: { authorization: auth.authorization } };
      await autocannon({ ...options, duration: 1 });
      const result = await autocannon({ ...options, duration: seconds });
      const wrong =
        expected === 200
          ? result.non2xx
          : result.requests.total - (result.statusCodeStats?.['401']?.count ?? 0);
      if (wrong > 0 || result.errors > 0)
        throw new Error(`${call}: ${wrong} unexpected answers, ${result.errors} errors`);
      rows.push({
        page,
        call,
        p50: result.latency.p50,
        p99: result.latency.p99,
        rps: result.requests.average,
      });
    }
    const width = Math.max(...rows.map((r) => r.call.length));
    log(
      `${'page'.padEnd(16)} ${'call'.padEnd(width)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ${'req/s'.padStart(7)}`,
    );
    for (const r of rows) {
      const flag = r.p99 >= 100 ? '  > 100 ms' : '';
      log(
        `${r.page.padEnd(16)} ${r.call.padEnd(width)} ${r.p50.toFixed(1).padStart(7)} ${r.p99.toFixed(1).padStart(7)} ${r.rps.toFixed(0).padStart(7)}${flag}`,
      );
    }
  } finally {
    if (api.process.exitCode === null) {
      api.process.kill('SIGTERM');
      await once(api.process, 'exit');
    }
    if (values.keep) {
      log(`kept: DATABASE_URL=${database.url} HERALD_SCHEMA=${database.schema}`);
      await database.db.close();
    } else await database.drop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench:ui failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
