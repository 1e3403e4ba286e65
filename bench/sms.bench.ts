/**
 * SMS campaigns benchmark (docs/benchmarks.md has results and how to read them).
 *
 *   npm run bench:sms -- [--rows 1000000] [--scanners 1] [--relays 1] [--build-node-flags='…'] [--build-only]
 *     (a) build: a child process uploads a generated `rows`-row GENERIC CSV (numbers over four
 *         operators) through SmsCampaignService.createBulk, streamed; a second child builds it with the
 *         build sweep (parse, normalize, de-duplicate, route, price, save in batches, charge, QUEUED), as
 *         `herald worker` does. Prints `build rows/s=…`, `build cpu_s=…` (the child's own CPU time, which
 *         other load on the machine moves less than rows/s) and `build peak_rss_mb=…` (goal ≤ 200 MB): the
 *         larger of the build child's own maxRSS and VmRSS sampled from /proc every 100 ms, and the same
 *         for a child that only starts (`baseline_rss_mb`). `--build-node-flags=…` are passed to the build
 *         child's node (e.g. `--build-node-flags=--max-old-space-size=96`). The children run compiled
 *         JavaScript, as `herald worker` runs from dist/ (the child bundled by esbuild, its packages
 *         external, under .cache/bench/); `--from-source` runs them through tsx instead (the loader
 *         itself costs ~45 MB of RSS).
 *     (b) dispatch: `scanners` scanner roles and `relays` relay roles (Kafka sink) in this process take
 *         the QUEUED campaign to every chunk confirmed by Kafka: claim, batches of 999 recipients
 *         (SKIP LOCKED), grouping into submission chunks, outbox, relay. `dispatch recipients/s=…`.
 *     (c) raw ceiling: the very same chunks (payload, key and headers read back from the outbox) sent
 *         from memory with kafkajs (idempotent, acks -1, one request in flight, the relay's batch
 *         size), no database. `raw recipients/s=…`, then `ratio=<dispatch/raw>`.
 *
 * Setup (database, topics) is not timed. Needs PostgreSQL and Kafka (npm run bench:sms starts them).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { Kafka, logLevel, type Message, Partitioners } from 'kafkajs';
import { heraldRegistry } from '../src/aggregates/registry.js';
import { silentLogger } from '../src/logger.js';
import { relayRole } from '../src/roles/relay-role.js';
import { runRole } from '../src/roles/runtime.js';
import { scannerRole } from '../src/roles/scanner-role.js';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    scanners: { type: 'string', default: '1' },
    relays: { type: 'string', default: '1' },
    'build-node-flags': { type: 'string', default: '' },
    'build-only': { type: 'boolean', default: false },
    'from-source': { type: 'boolean', default: false },
  },
});
const rows = Number(values.rows);
const HERE = dirname(fileURLToPath(import.meta.url));
const log = (line: string) => process.stdout.write(`${line}\n`);
const brokers = requireEnv('KAFKA_BROKERS').split(',');
const kafka = new Kafka({ clientId: 'herald-bench-sms', brokers, logLevel: logLevel.ERROR });

interface ChildReport {
  campaignId?: string;
  sizeBytes?: number;
  uploadMs?: number;
  buildMs?: number;
  buildCpuMs?: number;
  outcome?: {
    status: string;
    accepted: number;
    rejected: number;
    heapCollections?: number;
    parsedAhead?: number;
  };
  maxRssKb: number;
}

const CHILD_SOURCE = join(HERE, 'support', 'sms-build-child.ts');
let compiledChild: string | undefined;
/** node's arguments that run the build child: compiled once per run, or its source through tsx. */
async function childEntry(): Promise<string[]> {
  if (values['from-source']) return ['--import', 'tsx', CHILD_SOURCE];
  if (!compiledChild) {
    const outfile = join(HERE, '..', '.cache', 'bench', 'sms-build-child.mjs');
    await build({
      entryPoints: [CHILD_SOURCE],
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      logLevel: 'warning',
    });
    compiledChild = outfile;
  }
  return [compiledChild];
}

async function child(
  phase: 'upload' | 'build' | 'baseline',
  env: Record<string, string>,
  nodeFlags: string[] = [],
): Promise<ChildReport & { peakMb: number }> {
  const args = [...nodeFlags, ...(await childEntry())];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env, HERALD_LOG_LEVEL: 'silent', BENCH_ROWS: String(rows), BENCH_PHASE: phase },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let sampledPeakKb = 0;
  const sampler = setInterval(() => {
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0);
      sampledPeakKb = Math.max(sampledPeakKb, kb);
    } catch {
      // the child is gone
    }
  }, 100);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearInterval(sampler);
  if (code !== 0) throw new Error(`${phase} child exited with ${code}`);
  const report = JSON.parse(output.trim().split('\n').pop()!) as ChildReport;
  return { ...report, peakMb: Math.round(Math.max(report.maxRssKb, sampledPeakKb) / 1024) };
}

async function main() {
  const database = await createTestDatabase();
  const topic = uniqueName('bench_sms_submit');
  const rawTopic = uniqueName('bench_sms_raw');
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic, numPartitions: 4 },
      { topic: rawTopic, numPartitions: 4 },
    ],
  });
  const env = {
    DATABASE_URL: database.url,
    HERALD_SCHEMA: database.schema,
    HERALD_SMS_SUBMIT_TOPIC: topic,
    HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59',
    HERALD_SMS_BULK_MAX_RECIPIENTS: String(Math.max(rows, 1)),
  };
  try {
    log(`setup: ${rows} rows, topic ${topic} (4 partitions)`);
    // (a) upload, then build, each in a process of its own
    const nodeFlags = values['build-node-flags'] ? values['build-node-flags'].split(/\s+/) : [];
    const baseline = await child('baseline', env, nodeFlags);
    const upload = await child('upload', env);
    const build = await child('build', env, nodeFlags);
    if (build.outcome?.status !== 'QUEUED' || build.outcome.accepted !== rows) {
      throw new Error(`build ended ${JSON.stringify(build.outcome)}`);
    }
    log(
      `build: upload of ${upload.sizeBytes} bytes in ${Math.round(upload.uploadMs!)} ms (peak ${upload.peakMb} MB), build of ${rows} rows in ${Math.round(build.buildMs!)} ms${nodeFlags.length ? ` (node ${nodeFlags.join(' ')})` : ''}`,
    );
    log(`build rows/s=${Math.round((rows / build.buildMs!) * 1000)}`);
    log(
      `build cpu_s=${(build.buildCpuMs! / 1000).toFixed(1)} (the build child's own CPU: ${Math.round((rows / build.buildCpuMs!) * 1000)} rows per CPU second, less load-dependent than rows/s; heap collections it ran: ${build.outcome.heapCollections ?? 0}, records parsed ahead at most: ${build.outcome.parsedAhead ?? '?'})`,
    );
    log(
      `build baseline_rss_mb=${baseline.peakMb} (the same child, started and stopped; ${values['from-source'] ? 'source through tsx' : 'compiled'})`,
    );
    log(`build peak_rss_mb=${build.peakMb} (goal <= 200)`);
    if (values['build-only']) return;
    const campaignId = upload.campaignId!;

    // (b) dispatch through scanner and relay roles
    const config = database.config({
      ...env,
      AMQP_URL: '',
      HERALD_SCANNER_POLL_MS: '1000',
      HERALD_LOG_LEVEL: 'silent',
    });
    const db = database.db;
    await db.query('vacuum analyze campaign_recipient');
    const controller = new AbortController();
    const context = { config, logger: silentLogger, registry: heraldRegistry, signal: controller.signal };
    const started = performance.now();
    const roles = [
      ...Array.from({ length: Number(values.scanners) }, (_, i) =>
        runRole('scanner', scannerRole, {
          ...context,
          config: database.config({
            ...env,
            AMQP_URL: '',
            HERALD_LOG_LEVEL: 'silent',
            HERALD_POD: `bench-scanner-${i}`,
          }),
        }),
      ),
      ...Array.from({ length: Number(values.relays) }, (_, i) =>
        runRole('relay', relayRole, {
          ...context,
          config: database.config({
            ...env,
            AMQP_URL: '',
            HERALD_LOG_LEVEL: 'silent',
            HERALD_POD: `bench-relay-${i}`,
          }),
        }),
      ),
    ];
    let submittedMs = 0;
    for (;;) {
      const { rows: state } = await db.query<{ submitted: number; chunks: number; sent: number }>(
        `select (sms->'progress'->>'submitted')::int as submitted, (sms->>'submissions')::int as chunks,
                (select count(*)::int from outbox where status = 'sent') as sent
           from campaign where id = $1`,
        [campaignId],
      );
      const s = state[0]!;
      if (!submittedMs && s.submitted === rows) submittedMs = performance.now() - started;
      if (s.submitted === rows && s.sent === s.chunks) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const dispatchMs = performance.now() - started;
    controller.abort();
    await Promise.all(roles);
    const { rows: chunks } = await db.query<{
      message_id: string;
      partition_key: string;
      headers: Record<string, unknown>;
      payload: string;
      recipients: number;
    }>(
      `select message_id::text, partition_key, headers, payload::text as payload, jsonb_array_length(payload->'recipients') as recipients
         from outbox order by id`,
    );
    const recipients = chunks.reduce((n, c) => n + c.recipients, 0);
    if (recipients !== rows) throw new Error(`${recipients} recipients in chunks, expected ${rows}`);
    log(
      `dispatch: ${rows} recipients in ${chunks.length} chunks (avg ${Math.round(rows / chunks.length)}), all in the outbox after ${Math.round(submittedMs)} ms, all confirmed by Kafka after ${Math.round(dispatchMs)} ms (${values.scanners} scanner, ${values.relays} relay)`,
    );

    // (c) raw ceiling: the same chunks from memory.
    const producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    const prepared = chunks.map((c) => ({
      key: c.partition_key,
      headers: {
        ...Object.fromEntries(Object.entries(c.headers).map(([k, v]) => [k, String(v)])),
        'x-herald-message-id': c.message_id,
        'content-type': 'application/json',
      },
      payload: c.payload,
    }));
    // Up to the relay's batch size per request, and at most ~900 KB (the broker refuses a partition's
    // record batch over message.max.bytes, 1 MB by default: the relay's sink bisects such a batch; the
    // ceiling never sends one).
    const batchSize = config.relay.batchSize;
    const rawStarted = performance.now();
    let batch: Message[] = [];
    let bytes = 0;
    const flush = async () => {
      if (batch.length === 0) return;
      await producer.sendBatch({ acks: -1, topicMessages: [{ topic: rawTopic, messages: batch }] });
      batch = [];
      bytes = 0;
    };
    for (const p of prepared) {
      const value = Buffer.from(p.payload, 'utf8');
      if (batch.length >= batchSize || bytes + value.length > 900_000) await flush();
      batch.push({ key: p.key, value, headers: p.headers });
      bytes += value.length;
    }
    await flush();
    const rawMs = performance.now() - rawStarted;
    await producer.disconnect();
    const dispatchRate = Math.round((rows / dispatchMs) * 1000);
    const rawRate = Math.round((rows / rawMs) * 1000);
    log(`raw: the same ${chunks.length} chunks in ${Math.round(rawMs)} ms`);
    log(`dispatch recipients/s=${dispatchRate}`);
    log(`raw recipients/s=${rawRate}`);
    log(`ratio=${(dispatchRate / rawRate).toFixed(3)}`);
  } finally {
    await admin.deleteTopics({ topics: [topic, rawTopic] }).catch(() => {});
    await admin.disconnect();
    await database.drop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`bench:sms failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
