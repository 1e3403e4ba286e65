/**
 * An SMS world over SMPP for integration tests (ADR 0022): real PostgreSQL and Kafka (fresh topics),
 * `herald scanner` and `herald relay` in this process, the DLR consumer (the worker's, on its topic), the
 * SMSC simulator on a free port and `herald sms-gateway` in this process (or none, for tests that spawn
 * it), so a campaign goes scanner → outbox → relay → submit topic → gateway → SMPP → receipts → DLR topic
 * → roll-up, with every step the production one.
 */
import { dlrHandler, SMS_DLR_CONSUMER } from '../../src/aggregates/campaign/sms/dlr-consumer.js';
import { SmsGateway } from '../../src/aggregates/campaign/sms/gateway/gateway.js';
import type { GatewayClock } from '../../src/aggregates/campaign/sms/gateway/smsc-connection.js';
import { checkCampaignMoney } from '../../src/aggregates/campaign/sms/money-check.js';
import type { SmscSimulator } from '../../src/aggregates/campaign/sms/smsc-simulator.js';
import type { HeraldSettings } from '../../src/config.js';
import { waitFor } from '../../src/testing/wait.js';
import type { Consumer } from '../../src/worker/consume.js';
import { consumeKafka } from '../../src/worker/consume-kafka.js';
import type { KafkaFixture } from '../kafka/support/kafka-fixture.js';
import { runTestRole, testLogger } from './roles.js';
import type { TestDatabase } from './services.js';
import { uniqueName } from './services.js';
import { inlineRequest, ORG, smsService } from './sms.js';
import { gatewayEnv, startTestSmsc } from './smsc.js';

export const FINAL_CAMPAIGN = ['COMPLETED', 'PARTIAL', 'FAILED', 'CANCELLED', 'EXPIRED'];

export interface SmppWorld {
  config: HeraldSettings;
  env: Record<string, string>;
  smsc: SmscSimulator;
  gateway: SmsGateway | undefined;
  /** An instant inline campaign to these numbers (GENERIC text), charged; its id. */
  campaign(numbers: readonly string[], request?: Record<string, unknown>): Promise<string>;
  /** Waits until the campaign reaches a final status; returns it. */
  final(campaignId: string, timeoutMs?: number): Promise<string>;
  recipients(campaignId: string): Promise<
    {
      id: string;
      msisdn: string;
      status: string;
      dlr_status: string | null;
      dlr_code: string | null;
      failure_class: string | null;
      unconfirmed: boolean;
      attempts: number;
    }[]
  >;
  money(campaignId: string): ReturnType<typeof checkCampaignMoney>;
  /** The SMS campaign service (controls: pause, resume, cancel). */
  service: ReturnType<typeof smsService>['service'];
  stop(): Promise<void>;
}

/** The SMS settings of a test world: its topics, an always-open window, every part delivered, fast retries. */
export function smsWorldEnv(submitTopic: string, dlrTopic: string): Record<string, string> {
  return {
    HERALD_SMS_SUBMIT_TOPIC: submitTopic,
    HERALD_SMS_DLR_TOPIC: dlrTopic,
    HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59',
    HERALD_SMS_SIMULATOR_OUTCOMES: 'DELIVERED=100',
    HERALD_SMS_SIMULATOR_LATENCY_MS: '5-50',
    HERALD_SMS_RETRY_MINUTES: '0',
    HERALD_SMS_RETRY_JITTER_SECONDS: '0',
    HERALD_SMS_LEASE_TTL_SECONDS: '3',
  };
}

export async function smppWorld(
  t: TestDatabase,
  kafka: KafkaFixture,
  options: {
    env?: Record<string, string>;
    smsc?: Record<string, unknown>;
    tps?: number;
    clock?: GatewayClock;
    /** Run the gateway in this process (default) or not (the test spawns it). */
    gateway?: boolean;
  } = {},
): Promise<SmppWorld> {
  const submitTopic = await kafka.topic('sms_submit');
  const dlrTopic = await kafka.topic('sms_dlr');
  const base = {
    ...smsWorldEnv(submitTopic, dlrTopic),
    HERALD_SCANNER_POLL_MS: '200',
    HERALD_RELAY_IDLE_POLL_MS: '200',
    AMQP_URL: '', // a Kafka-only relay; no tick consumer on the shared broker
    ...options.env,
  };
  const behaviour = t.config(base).sms.simulator;
  const smsc = await startTestSmsc({
    behaviour,
    ...(options.tps !== undefined ? { tps: options.tps } : {}),
    ...(options.clock ? { now: options.clock.now } : {}),
  });
  const env = { ...gatewayEnv(smsc.port, options.smsc ?? {}, base), ...base };
  const config = t.config(env);
  const controller = new AbortController();
  const roles = [
    runTestRole('scanner', config, controller.signal),
    runTestRole('relay', config, controller.signal),
  ];
  const logger = testLogger();
  const dlr: Consumer = await consumeKafka(
    { db: t.db, brokers: config.kafkaBrokers, logger },
    dlrTopic,
    dlrHandler({ schema: t.db.schema }),
    { consumer: SMS_DLR_CONSUMER, groupId: uniqueName('herald_test_dlr'), retryDelayMs: 500 },
  );
  let gateway: SmsGateway | undefined;
  if (options.gateway !== false) {
    gateway = new SmsGateway({
      db: t.db,
      config,
      logger,
      ...(options.clock ? { clock: options.clock } : {}),
    });
    await gateway.start();
  }
  const { service } = smsService(t, { settings: config.sms });
  return {
    config,
    env,
    smsc,
    gateway,
    async campaign(numbers, request = {}) {
      const created = await service.create(
        inlineRequest({
          templateType: 'GENERIC',
          template: 'ঈদ মোবারক! আপনার জন্য বিশেষ ছাড়: আজই দোকানে আসুন, সব পণ্যে ত্রিশ শতাংশ ছাড়, শুধু আজকের জন্য।',
          recipients: numbers.map((msisdn) => ({ msisdn })),
          ...request,
        }),
        { organizationId: ORG },
      );
      return created.body.campaignId;
    },
    async final(campaignId, timeoutMs = 60_000) {
      try {
        return await waitFor(
          async () => {
            const { rows } = await t.db.query<{ status: string }>(
              'select status from campaign where id = $1',
              [campaignId],
            );
            const status = rows[0]?.status;
            return status && FINAL_CAMPAIGN.includes(status) ? status : undefined;
          },
          { timeoutMs, intervalMs: 100, what: `campaign ${campaignId} final` },
        );
      } catch (error) {
        // What was left, for the failure message.
        const { rows } = await t.db.query<{ what: string }>(
          `select 'campaign ' || (select status from campaign where id = $1) || '; recipients ' ||
                  (select string_agg(status || ' ' || n, ', ') from (select status, count(*) n from campaign_recipient where campaign_id = $1 group by 1) r) ||
                  '; parts ' || coalesce((select string_agg(state || ' ' || n, ', ') from (select state, count(*) n from sms_gateway_part where campaign_id = $1 group by 1) p), 'none') ||
                  '; reports ' || (select count(*) from sms_gateway_report g join sms_gateway_submission s using (submission_id) where s.campaign_id = $1) ||
                  '; unmatched receipts ' || (select count(*) from sms_gateway_receipt where part_id is null and smsc_message_id is not null) as what`,
          [campaignId],
        );
        throw new Error(
          `${(error as Error).message}: ${rows[0]?.what}; gateway ${JSON.stringify(gateway?.status())}; smsc ${JSON.stringify(smsc.stats)}`,
        );
      }
    },
    async recipients(campaignId) {
      const { rows } = await t.db.query<{
        id: string;
        msisdn: string;
        status: string;
        dlr_status: string | null;
        dlr_code: string | null;
        failure_class: string | null;
        unconfirmed: boolean;
        attempts: number;
      }>(
        `select id::text, msisdn, status, dlr_status, dlr_code, failure_class, unconfirmed, attempts
           from campaign_recipient where campaign_id = $1 order by id`,
        [campaignId],
      );
      return rows;
    },
    money: (campaignId) => checkCampaignMoney(t.db, campaignId),
    service,
    async stop() {
      await gateway?.stop();
      controller.abort();
      await Promise.all(roles);
      await dlr.stop({ timeoutMs: 5_000 });
      await smsc.close();
    },
  };
}

export { ORG };
