/**
 * The SMS section of `npm run demo` (seed 003, part 1), on the demo's running relay, scanner and worker:
 * an organization's balance topped up in the billing ledger; an inline personalized campaign previewed,
 * then created (its recipients frozen and charged once, one recipient in London deferred by the
 * campaign's send window); a small CSV campaign with a header, a duplicate and an invalid number built
 * by the worker; both dispatched by the scanner in submission chunks that the relay publishes to Kafka,
 * where the SMS gateway simulator answers with delivery reports. Prints the progress counters as they
 * change, each campaign as `herald campaigns show` does, and the ledger. Returns whether it all ended as
 * expected; without KAFKA_BROKERS it says so and skips.
 */

import { randomUUID } from 'node:crypto';
import { loadUpload } from '../adapters/postgres/sms-queries.js';
import { PostgresLedger } from '../aggregates/campaign/sms/billing.js';
import { SmsCampaignService } from '../aggregates/campaign/sms/service.js';
import { SmsGatewaySimulator } from '../aggregates/campaign/sms/simulator.js';
import type { HeraldConfig } from '../config.js';
import type { ExistingCampaign } from '../domain/campaign.js';
import { silentLogger } from '../logger.js';
import type { Runtime } from '../runtime/runtime.js';
import { describeCampaign } from './campaign-commands.js';

export interface SmsDemoContext {
  runtime: Runtime;
  config: HeraldConfig;
  out: (line?: string) => void;
}

const ORG = 'org-demo';

export async function runSmsDemo({ runtime, config, out }: SmsDemoContext): Promise<boolean> {
  out();
  if (config.kafkaBrokers.length === 0) {
    out('sms campaigns (seed 003): skipped, KAFKA_BROKERS is not set (the SMS submit topic is on Kafka)');
    return true;
  }
  out(
    `sms campaigns (seed 003): submit topic ${config.sms.submitTopic}, delivery reports on ${config.sms.dlrTopic}`,
  );
  const ledger = new PostgresLedger(runtime.db);
  const sms = new SmsCampaignService({
    db: runtime.db,
    handler: runtime.handler,
    billing: ledger,
    settings: config.sms,
    idempotencyTtlMs: config.api.idempotencyTtlMs,
    logger: runtime.logger,
  });
  // A group of its own that sees only what this run submits (the topic may hold earlier runs' chunks).
  const simulator = new SmsGatewaySimulator({
    brokers: config.kafkaBrokers,
    security: config.kafka.security,
    settings: config.sms,
    logger: silentLogger,
    topicPartitions: config.kafka.topicPartitions,
    groupId: `herald-sms-simulator-demo-${randomUUID()}`,
    fromBeginning: false,
  });
  await simulator.start();
  try {
    const credit = await ledger.credit({ organizationId: ORG, key: 'demo-top-up', amount: '500' });
    out(`balance of ${ORG}: ${credit.balanceAfter} BDT (credited once under key demo-top-up)`);

    const { rows } = await runtime.db.query<{ start: string; end: string }>(
      `select to_char(now() at time zone $1 - interval '1 hour', 'HH24:MI') as start,
              to_char(now() at time zone $1 + interval '2 hours', 'HH24:MI') as end`,
      [config.sms.zone],
    );
    const crossesMidnight = rows[0]!.start >= rows[0]!.end;
    const request = {
      name: 'Eid greetings (inline, personalized)',
      messageType: 'PROMOTIONAL' as const,
      lang: 'bn' as const,
      campaignId: 'BTRC-DEMO-001',
      templateType: 'PERSONALIZED' as const,
      template: 'প্রিয় {{name}}, ঈদ মোবারক! আপনার ব্যালেন্স {{balance}} টাকা।',
      // A send window around now in Dhaka local time: the Londoner (5–6 hours behind) is deferred.
      ...(crossesMidnight ? {} : { sendWindow: { start: rows[0]!.start, end: rows[0]!.end } }),
      recipients: [
        { msisdn: '01712345678', tags: { name: 'Amina', balance: '250.00' } },
        { msisdn: '8801812345678', tags: { name: 'Rahim', balance: '125.50' } },
        { msisdn: '+8801912345678', tags: { name: 'নুসরাত', balance: '500.00' } },
        { msisdn: '01512345678', tags: { name: 'Karim', balance: '75.25' } },
        { msisdn: '01612345678', tags: { name: 'Shirin', balance: '1020.00' } },
        {
          msisdn: '01313345678',
          tags: { name: 'Tanvir (London)', balance: '42.00' },
          timezone: 'Europe/London',
        },
      ],
    };
    const preview = await sms.preview(request, { organizationId: ORG });
    out(
      `preview: ${preview.body.recipients} recipients, ${preview.body.segments} segments, ${preview.body.totalCost} BDT ` +
        `(${preview.body.byOperator.map((o) => `${o.operator} ${o.recipients}`).join(', ')}); nothing written`,
    );
    out(
      `  e.g. ${preview.body.messages[0]!.msisdn}: "${preview.body.messages[0]!.content}" (${preview.body.messages[0]!.encoding}, ${preview.body.messages[0]!.segments} segment(s))`,
    );
    const inline = await sms.create(request, {
      organizationId: ORG,
      idempotency: {
        key: 'demo-inline-1',
        scope: JSON.stringify([ORG, 'POST', '/v1/campaigns']),
        fingerprint: 'demo',
      },
      meta: { actor: 'demo' },
    });
    out(
      `created "${request.name}": ${inline.status} ${inline.body.status}, charged ${inline.body.sms!.totalCost} BDT with key ${inline.body.sms!.chargeKey}`,
    );
    const again = await sms.create(request, {
      organizationId: ORG,
      idempotency: {
        key: 'demo-inline-1',
        scope: JSON.stringify([ORG, 'POST', '/v1/campaigns']),
        fingerprint: 'demo',
      },
    });
    out(
      `retried with the same Idempotency-Key: replayed=${again.replayed}, same campaign ${again.body.campaignId === inline.body.campaignId}`,
    );

    const csv = [
      'msisdn',
      '01712000001',
      '01812000002',
      '01912000003',
      '+8801512000004',
      '8801712000005',
      '01712000001',
      '0171200',
      '',
    ].join('\n');
    const bulk = await sms.createBulk(
      {
        name: 'Boishakh sale (CSV)',
        messageType: 'PROMOTIONAL',
        lang: 'bn',
        campaignId: 'BTRC-DEMO-002',
        templateType: 'GENERIC',
        template: 'শুভ নববর্ষ! সব পণ্যে ৩০% ছাড়।',
        fileName: 'boishakh.csv',
      },
      (async function* () {
        yield Buffer.from(`\uFEFF${csv}`);
      })(),
      { organizationId: ORG, meta: { actor: 'demo' } },
    );
    out(
      `uploaded boishakh.csv (8 rows, a duplicate, an invalid number): ${bulk.status} ${bulk.body.campaign.status}`,
    );
    out();

    const ids = [inline.body.campaignId, bulk.body.campaign.campaignId];
    const labels = ['inline', 'csv'];
    const deferredExpected = request.sendWindow ? 1 : 0;
    const done = (c: ExistingCampaign, i: number) =>
      c.status === 'DISPATCHING' &&
      c.sms!.progress.pending === 0 &&
      c.sms!.progress.deferred === (i === 0 ? deferredExpected : 0);
    const deadline = Date.now() + 45_000;
    let last = '';
    let states: ExistingCampaign[] = [];
    for (;;) {
      states = await Promise.all(ids.map((id) => sms.get(id)));
      const line = states
        .map((c, i) => {
          const p = c.sms!.progress;
          return `${labels[i]}=${c.status} pending ${p.pending} deferred ${p.deferred} submitted ${p.submitted}`;
        })
        .join('  |  ');
      const reports = ids.reduce((n, id) => n + (simulator.stats.byCampaign.get(id) ?? 0), 0);
      const full = `${line}  |  delivery reports ${reports}`;
      if (full !== last) {
        out(`[${new Date().toISOString().slice(11, 23)}] ${full}`);
        last = full;
      }
      const submitted = states.reduce((n, c) => n + c.sms!.progress.submitted, 0);
      if (states.every(done) && reports >= submitted) break;
      if (Date.now() > deadline) {
        out('sms demo: timed out waiting for the campaigns to be dispatched and reported');
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    out();
    for (const [i, c] of states.entries()) {
      const upload = c.sms?.source === 'csv' ? await loadUpload(runtime.db, c.campaignId) : null;
      for (const line of describeCampaign(c, upload)) out(line);
      if (i === 0) out();
    }
    out();
    out(
      `delivery reports from the simulator: ${Object.entries(simulator.stats.reports)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
    const totals = await ledger.totals(ORG);
    out(
      `ledger of ${ORG}: balance ${totals!.balance} = credits ${totals!.credits} − deductions ${totals!.deductions} + refunds ${totals!.refunds}`,
    );
    out(
      'sms demo: both campaigns charged once and dispatched; the deferred recipient waits for its window (part 2 rolls reports up)',
    );
    return true;
  } finally {
    await simulator.stop();
  }
}
