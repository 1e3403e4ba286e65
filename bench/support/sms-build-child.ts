/**
 * One phase of bench:sms's CSV campaign as its own process, so its peak RSS is its own:
 * BENCH_PHASE=upload uploads a generated BENCH_ROWS-row GENERIC CSV (numbers spread over the four
 * seeded operators) through SmsCampaignService.createBulk, streamed; BENCH_PHASE=build builds the
 * waiting upload with the build sweep (as `herald worker` does). Each reports one JSON line: the
 * campaign id, the phase's time (and the build's CPU time), the build's outcome, and its own peak RSS
 * (process.resourceUsage().maxRSS). Configured like the real roles through loadConfig (DATABASE_URL,
 * HERALD_SCHEMA, HERALD_SMS_*); BENCH_TEMPLATE replaces the campaign's text (bench:smpp).
 */
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { smsBuildSweeper } from '../../src/aggregates/campaign/sms/build.js';
import { SmsCampaignService } from '../../src/aggregates/campaign/sms/service.js';
import { loadConfig } from '../../src/config.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';

const rows = Number(process.env.BENCH_ROWS);
const config = loadConfig(process.env, { pod: 'bench-sms-build' });
const db = createDatabase({ url: config.databaseUrl, schema: config.schema, poolSize: 4 });
const handler = new CommandHandler({ db, pod: config.pod });
const ledger = new PostgresLedger(db);
const organizationId = 'org-bench';
await ledger.credit({ organizationId, key: 'bench-top-up', amount: '10000000' });
const service = new SmsCampaignService({
  db,
  handler,
  billing: ledger,
  settings: config.sms,
  idempotencyTtlMs: config.api.idempotencyTtlMs,
});

const PREFIXES = ['017', '018', '019', '015'];
/** The file, generated 64 KiB at a time (never whole in memory). */
async function* csv(): AsyncGenerator<Buffer> {
  let text = 'msisdn\n';
  for (let i = 0; i < rows; i++) {
    text += `${PREFIXES[i % 4]}${String(10_000_000 + Math.floor(i / 4)).slice(-8)}\n`;
    if (text.length >= 65_536) {
      yield Buffer.from(text);
      text = '';
    }
  }
  if (text) yield Buffer.from(text);
}

const phase = process.env.BENCH_PHASE;
if (phase === 'baseline') {
  await db.close();
  process.stdout.write(`${JSON.stringify({ maxRssKb: process.resourceUsage().maxRSS })}\n`);
  process.exit(0);
}
if (phase === 'build') {
  const sweeper = smsBuildSweeper({
    db,
    handler,
    logger: silentLogger,
    billing: ledger,
    settings: config.sms,
  });
  const buildStarted = performance.now();
  const cpuStarted = process.cpuUsage();
  await sweeper.sweep();
  const buildMs = performance.now() - buildStarted;
  const cpu = process.cpuUsage(cpuStarted);
  const outcome = sweeper.builder.outcomes[0];
  await db.close();
  process.stdout.write(
    `${JSON.stringify({ buildMs, buildCpuMs: (cpu.user + cpu.system) / 1000, outcome, maxRssKb: process.resourceUsage().maxRSS })}\n`,
  );
  process.exit(0);
}

const uploadStarted = performance.now();
const created = await service.createBulk(
  {
    name: `bench ${rows}`,
    messageType: 'PROMOTIONAL',
    lang: 'bn',
    campaignId: 'BTRC-BENCH',
    templateType: 'GENERIC',
    template: process.env.BENCH_TEMPLATE || 'পহেলা বৈশাখে সব পণ্যে ৩০% ছাড়!',
    fileName: 'bench.csv',
  },
  csv(),
  { organizationId },
);
const uploadMs = performance.now() - uploadStarted;
await db.close();
process.stdout.write(
  `${JSON.stringify({
    campaignId: created.body.campaign.campaignId,
    sizeBytes: created.body.upload.sizeBytes,
    uploadMs,
    maxRssKb: process.resourceUsage().maxRSS,
  })}\n`,
);
