/**
 * The SMS section of `npm run demo`, on the demo's running relay, scanner and worker: a balance topped up,
 * an inline personalized campaign previewed and created (one recipient deferred by its send window), a
 * small CSV campaign built, and one sent to the simulator's fixed test numbers. The chunks go over SMPP:
 * `herald sms-gateway` (in this process) binds to the SMSC simulator (`herald sms-simulator --smpp`, in
 * this process on a free port) and submits every part; the receipts come back as deliver_sm and become
 * delivery reports, rolled up until the CSV campaign is COMPLETED, the test-number one PARTIAL with its
 * failures refunded (then resent), and the inline one cancelled mid-dispatch with its deferred recipient
 * refunded. Prints each campaign with its money check and returns whether it all balanced; without
 * KAFKA_BROKERS it says so and skips. Charges go through the billing port the settings choose: the demo
 * starts the billing test server and sets HERALD_BILLING=http (campaign/demo.ts), whose own ledger is then
 * credited, listed and checked; `HERALD_BILLING=ledger npm run demo` uses the PostgreSQL ledger.
 * ADR 0014, 0019, 0022, 0023.
 */

import { randomUUID } from 'node:crypto';
import { loadUpload } from '../../../adapters/postgres/sms-queries.js';
import type { ExistingCampaign } from '../../../domain/campaign.js';
import { addMoney } from '../../../domain/sms/money.js';
import { silentLogger } from '../../../logger.js';
import type { DemoContext } from '../../../registry/demo.js';
import { describeCampaign } from '../cli.js';
import type { CampaignConfig } from '../settings.js';
import { configuredBilling, PostgresLedger } from './billing.js';
import type { BillingSimulator } from './billing-simulator.js';
import { SmsGateway } from './gateway/gateway.js';
import type { SmscSettings } from './gateway/settings.js';
import { type CampaignLedgerReader, checkCampaignMoney, ledgerKeysFromEntries } from './money-check.js';
import { SmsCampaignService } from './service.js';
import { SmscSimulator } from './smsc-simulator.js';

const ORG = 'org-demo';

/** The simulator's fixed outcomes in the demo (E.164 digits). */
const DEMO_TEST_NUMBERS = [
  { msisdn: '8801712000099', status: 'REJECTED', errorCode: null, label: 'rejected' },
  { msisdn: '8801812000098', status: 'FAILED', errorCode: '27', label: 'absent subscriber, retryable' },
  { msisdn: '8801912000097', status: 'NOT_AVAILABLE', errorCode: null, label: 'never confirmed' },
] as const;

export async function runSmsDemo(
  { runtime, config, out }: Pick<DemoContext<CampaignConfig>, 'runtime' | 'config' | 'out'>,
  /** The billing test server the demo's HERALD_BILLING=http points at (its ledger is read here). */
  billingServer?: BillingSimulator,
): Promise<boolean> {
  out();
  if (config.kafkaBrokers.length === 0) {
    out('sms campaigns (seed 003): skipped, KAFKA_BROKERS is not set (the SMS submit topic is on Kafka)');
    return true;
  }
  out(
    `sms campaigns (seed 003): submit topic ${config.sms.submitTopic}, delivery reports on ${config.sms.dlrTopic}`,
  );
  const http = config.billing.mode === 'http';
  if (http && !billingServer)
    throw new Error('HERALD_BILLING=http, but the demo started no billing test server');
  const ledger = http ? null : new PostgresLedger(runtime.db);
  // The port the roles resolved for these settings (one HTTP client per process).
  const billing = configuredBilling(config.billing, runtime.db, runtime.logger);
  const sms = new SmsCampaignService({
    db: runtime.db,
    handler: runtime.handler,
    billing,
    settings: config.sms,
    idempotencyTtlMs: config.api.idempotencyTtlMs,
    logger: runtime.logger,
  });
  // The operator's SMSC: every number is delivered except the fixed test numbers.
  const DEMO_ACCOUNT = { systemId: 'herald-demo', password: 'demo' };
  const simulator = await new SmscSimulator({
    port: 0,
    accounts: new Map([[DEMO_ACCOUNT.systemId, DEMO_ACCOUNT.password]]),
    behaviour: {
      ...config.sms.simulator,
      outcomes: [{ outcome: 'DELIVERED', weight: 1 }],
      fixed: new Map(DEMO_TEST_NUMBERS.map((n) => [n.msisdn, { status: n.status, errorCode: n.errorCode }])),
    },
    logger: silentLogger,
  }).start();
  const smsc: SmscSettings = {
    name: 'demo-smsc',
    host: '127.0.0.1',
    port: simulator.port,
    tls: false,
    systemId: DEMO_ACCOUNT.systemId,
    systemType: '',
    password: DEMO_ACCOUNT.password,
    channels: ['*'],
    binds: { transceivers: 1, transmitters: 0, receivers: 0 },
    window: 10,
    tpsPerBind: 100,
    tps: 100,
    destTon: 1,
    destNpi: 1,
    concatenation: 'udh',
    serviceType: '',
  };
  // The gateway's group sees only what this run submits (the topic may hold earlier runs' chunks).
  const gateway = new SmsGateway({
    db: runtime.db,
    config: { ...config, smsGateway: { ...config.smsGateway, smscs: [smsc] } },
    logger: silentLogger,
    wakeups: runtime.notifier,
    consumerGroup: `herald-sms-gateway-demo-${randomUUID()}`,
    fromBeginning: false,
  });
  await gateway.start();
  out(
    `sms gateway: bound over SMPP to the SMSC simulator on 127.0.0.1:${simulator.port} as ${DEMO_ACCOUNT.systemId} (window 10, 100 submit_sm/s)`,
  );
  try {
    const credit = ledger
      ? await ledger.credit({ organizationId: ORG, key: 'demo-top-up', amount: '500' })
      : billingServer!.credit(ORG, '500', 'demo-top-up');
    out(
      `balance of ${ORG}: ${credit.balanceAfter} BDT (credited once under key demo-top-up) ` +
        (http
          ? `in the billing test server at ${config.billing.http!.url} (HERALD_BILLING=http, bearer token)`
          : 'in the PostgreSQL ledger (HERALD_BILLING=ledger)'),
    );

    // A window around now in Dhaka local time, clamped to the day (a window does not cross midnight).
    const { rows } = await runtime.db.query<{ start: string; end: string }>(
      `select to_char(greatest(local - interval '1 hour', date_trunc('day', local)), 'HH24:MI') as start,
              to_char(least(local + interval '2 hours', date_trunc('day', local) + interval '23 hours 59 minutes'), 'HH24:MI') as end
         from (select now() at time zone $1 as local) n`,
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
      `preview: ${preview.recipients} recipients, ${preview.segments} segments, ${preview.totalCost} BDT ` +
        `(${preview.byOperator.map((o) => `${o.operator} ${o.recipients}`).join(', ')}); nothing written`,
    );
    out(
      `  e.g. ${preview.messages[0]!.msisdn}: "${preview.messages[0]!.content}" (${preview.messages[0]!.encoding}, ${preview.messages[0]!.segments} segment(s))`,
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
      `created "${request.name}": ${inline.body.status}, charged ${inline.body.sms!.totalCost} BDT with key ${inline.body.sms!.chargeKey}`,
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
    out(`uploaded boishakh.csv (8 rows, a duplicate, an invalid number): ${bulk.body.campaign.status}`);
    out();

    // A third campaign with the simulator's fixed test numbers: one rejected (permanent: FAILED and
    // refunded), one failing with a retryable code on every attempt (retried until its attempts run
    // out, then refunded), one never confirmed (NOT_AVAILABLE: FAILED, unconfirmed, not refunded).
    const flash = await sms.create(
      {
        name: 'Flash sale (test numbers)',
        messageType: 'PROMOTIONAL' as const,
        lang: 'bn' as const,
        campaignId: 'BTRC-DEMO-003',
        templateType: 'GENERIC' as const,
        template: 'আজ রাত ১২টা পর্যন্ত ফ্ল্যাশ সেল!',
        recipients: [
          { msisdn: '01712000011' },
          { msisdn: '01812000012' },
          { msisdn: '01912000013' },
          ...DEMO_TEST_NUMBERS.map((n) => ({ msisdn: `+${n.msisdn}` })),
        ],
      },
      { organizationId: ORG, meta: { actor: 'demo' } },
    );
    out(
      `created "Flash sale (test numbers)": ${flash.body.status}, 6 recipients (${DEMO_TEST_NUMBERS.map((n) => `${n.msisdn} ${n.label}`).join(', ')})`,
    );
    out();

    const ids = [inline.body.campaignId, bulk.body.campaign.campaignId, flash.body.campaignId];
    const labels = ['inline', 'csv', 'flash'];
    const progressLine = (states: ExistingCampaign[]) =>
      states
        .map((c, i) => {
          const p = c.sms!.progress;
          return (
            `${labels[i]}=${c.status} sent ${p.submitted} retry ${p.retryPending} ok ${p.delivered} ` +
            `failed ${p.failed}${p.refunded ? ` (refunded ${p.refunded})` : ''}${p.deferred ? ` deferred ${p.deferred}` : ''}${p.cancelled ? ` cancelled ${p.cancelled}` : ''}`
          );
        })
        .join(' | ');
    let last = '';
    /** Polls the three campaigns, printing each change, until `until` holds (or 60 s pass). */
    const watch = async (what: string, until: (states: ExistingCampaign[]) => boolean) => {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const states = await Promise.all(ids.map((id) => sms.get(id)));
        const line = progressLine(states);
        if (line !== last) {
          out(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
          last = line;
        }
        if (until(states)) return states;
        if (Date.now() > deadline) throw new Error(`sms demo: timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const settled = (c: ExistingCampaign) =>
      c.sms!.progress.refunded + c.sms!.progress.unconfirmed === c.sms!.progress.failed;
    const deferredExpected = request.sendWindow ? 1 : 0;
    // The inline campaign waits in DISPATCHING for its Londoner's window: cancel it mid-dispatch.
    await watch(
      'the campaigns to be sent and reported',
      ([a, b, c]) =>
        a!.status === (deferredExpected ? 'DISPATCHING' : 'COMPLETED') &&
        a!.sms!.progress.delivered === 5 &&
        b!.status === 'COMPLETED' &&
        c!.status === 'PARTIAL' &&
        settled(c!),
    );
    if (deferredExpected) {
      await sms.cancel(
        inline.body.campaignId,
        'the Eid greeting went out to everyone who could get it today',
        {
          meta: { actor: 'demo' },
        },
      );
      out(`cancelled "${request.name}" mid-dispatch (its London recipient still waits for its window)`);
      await watch('the cancellation to settle', ([a]) => a!.status === 'CANCELLED');
    }
    const plan = await sms.resendPreview(flash.body.campaignId);
    out(
      `resend preview of "Flash sale": ${plan.recipients} failed recipients, cost ${plan.cost} BDT, key ${plan.chargeKey}; nothing charged yet`,
    );
    const resent = await sms.resend(
      flash.body.campaignId,
      { reason: 'second try for the failed numbers' },
      { organizationId: ORG, meta: { actor: 'demo' } },
    );
    out(
      `resent: ${resent.body.status}, resend attempt ${resent.body.resendAttempt}, total charged ${resent.body.sms!.totalCost} BDT`,
    );
    const final = await watch(
      'the resend to finish',
      ([, , c]) => c!.status === 'PARTIAL' && c!.resendAttempt === 1 && settled(c!),
    );
    out();
    // With HTTP billing the ledger side of the money check is the billing server's own.
    const serverLedger: CampaignLedgerReader = async (c, sql) => {
      const { rows: recipients } = await sql.query<{ id: string }>(
        'select id::text from campaign_recipient where campaign_id = $1',
        [c.campaignId],
      );
      return ledgerKeysFromEntries(
        billingServer!.entries(c.organizationId),
        c.campaignId,
        new Set(recipients.map((r) => r.id)),
      );
    };
    const checks = await Promise.all(
      ids.map((id) => checkCampaignMoney(runtime.db, id, http ? { ledger: serverLedger } : {})),
    );
    for (const [i, c] of final.entries()) {
      const upload = c.sms?.source === 'csv' ? await loadUpload(runtime.db, c.campaignId) : null;
      for (const line of describeCampaign(c, upload, checks[i])) out(line);
      out();
    }
    const st = simulator.stats;
    out(
      `SMSC simulator (SMPP): ${st.submits} submit_sm, ${st.accepted} accepted, ${st.receiptsSent} receipts, ` +
        `${st.throttled} throttled; ${simulator.partsReceived} parts to ${simulator.numbersReached} numbers ` +
        `(the retried and resent test numbers got theirs again, each time a new submission)`,
    );
    if (ledger) {
      out(`ledger entries of ${ORG} (each key applied once):`);
      for (const e of await ledger.entries(ORG))
        out(`  ${e.kind.padEnd(9)} ${e.amount.padStart(9)}  ${e.key}`);
      const totals = await ledger.totals(ORG);
      out(
        `ledger of ${ORG}: balance ${totals!.balance} = credits ${totals!.credits} − deductions ${totals!.deductions} + refunds ${totals!.refunds}`,
      );
    } else {
      const server = billingServer!;
      const entries = server.entries(ORG);
      out(`the billing test server's entries for ${ORG} (each key applied once):`);
      for (const e of entries) out(`  ${e.kind.padEnd(9)} ${e.amount.padStart(9)}  ${e.key}`);
      const sum = (kind: string) =>
        entries.filter((e) => e.kind === kind).reduce((total, e) => addMoney(total, e.amount), '0.0000');
      out(
        `its ledger of ${ORG}: balance ${server.balance(ORG)} = credits ${sum('credit')} − deductions ${sum('deduction')} + refunds ${sum('refund')}`,
      );
      const calls = server.requests.filter((r) => r.operation !== 'control');
      const repeats = calls.filter((r) => r.outcome === 'repeat').length;
      out(
        `billing calls over HTTP: ${calls.length} (${repeats} answered a repeat: the first result), ` +
          `${calls.filter((r) => !r.authorized).length} without a valid token`,
      );
    }
    const balanced = checks.every((m) => m.balanced);
    out(
      balanced
        ? 'sms demo: COMPLETED, PARTIAL (resent once after its preview) and CANCELLED mid-dispatch; every charge delivered, refunded or unconfirmed, each key once'
        : `sms demo: money check failed: ${checks.flatMap((m) => m.problems).join('; ')}`,
    );
    return balanced;
  } finally {
    await gateway.stop();
    await simulator.close();
  }
}
