/**
 * `herald sms-gateway` (ADR 0022): the SMS campaigns' operator path over SMPP 3.4. It consumes the submit
 * topic through the consumer toolkit (consumer.ts: inbox, one delivery policy), sends each recipient's
 * parts to the SMSC of its frozen route (smsc-connection.ts: binds, windows, TPS, throttling, receipts),
 * and turns what comes back into DeliveryReports on the DLR topic as outbox rows (reports.ts), which the
 * worker's DLR consumer and the scanner's roll-up take from there (ADR 0019). Its unconfirmed sweep turns a
 * part that was written but never answered by a gateway that died into an UNCONFIRMED recipient (never
 * resent: invariant 9). Any number of gateways may run: parts are claimed with SKIP LOCKED and every
 * change is guarded by the part's state and owner. SIGTERM: no new chunks, no new windows, the
 * outstanding answers waited for and recorded, a clean unbind.
 */
import { matchRecentReceipts, sweepUnconfirmed } from '../../../../adapters/postgres/sms-gateway-queries.js';
import { ConfigError, errorMessage } from '../../../../errors.js';
import type { Logger } from '../../../../logger.js';
import type { Database } from '../../../../ports/database.js';
import { channels, type WakeupSignal } from '../../../../ports/wakeups.js';
import type { RoleDefinition } from '../../../../registry/role.js';
import { aborted } from '../../../../roles/runtime.js';
import { startConsumer } from '../../../../roles/worker-role.js';
import type { Consumer } from '../../../../worker/consume.js';
import { defineConsumer } from '../../../../worker/consumer-definition.js';
import type { CampaignConfig } from '../../settings.js';
import type { SmsSubmission } from '../dispatch.js';
import { gatewayConsumer, SMS_GATEWAY_CONSUMER, smsSubmissionSchema } from './consumer.js';
import { reportRecipients } from './reports.js';
import { type GatewayClock, SmscConnection } from './smsc-connection.js';

export type SmsGatewayConfig = CampaignConfig;

export interface SmsGatewayDeps {
  db: Database;
  config: SmsGatewayConfig;
  logger: Logger;
  wakeups?: WakeupSignal | undefined;
  clock?: GatewayClock;
  /** Whether to consume the submit topic (tests may feed parts otherwise). Default true. */
  consume?: boolean;
  /** The Kafka consumer group (default: the inbox name, `sms-gateway`; tests sharing a broker pass their own). */
  consumerGroup?: string;
  /** A new consumer group starts at the earliest offset (default) or sees only chunks written after it joined. */
  fromBeginning?: boolean;
}

export class SmsGateway {
  readonly connections = new Map<string, SmscConnection>();
  private consumer: Consumer | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> = Promise.resolve();
  private readonly stopController = new AbortController();
  readonly stats = { unconfirmedSwept: 0 };

  constructor(private readonly deps: SmsGatewayDeps) {
    const { config } = deps;
    if (config.smsGateway.smscs.length === 0) {
      throw new ConfigError(
        'HERALD_SMS_GATEWAY_SMSCS',
        'is required by the sms-gateway: at least one SMSC connection',
      );
    }
    for (const smsc of config.smsGateway.smscs) {
      this.connections.set(
        smsc.name,
        new SmscConnection({
          db: deps.db,
          smsc,
          gateway: config.smsGateway,
          sms: config.sms,
          logger: deps.logger,
          pod: config.pod,
          ...(deps.clock ? { clock: deps.clock } : {}),
          outboxWritten: () => this.outboxWritten(),
        }),
      );
    }
  }

  private outboxWritten(): void {
    this.deps.wakeups?.signal(channels.outbox(this.deps.db.schema));
  }

  async start(signal?: AbortSignal): Promise<void> {
    for (const connection of this.connections.values()) connection.start();
    const { config } = this.deps;
    const interval = Math.max(250, Math.min(5_000, Math.floor(config.smsGateway.unconfirmedAfterMs / 4)));
    const sweep = () => {
      this.sweeping = this.sweepUnconfirmed()
        .then(() => this.matchLateReceipts())
        .then(() => {})
        .catch((error: unknown) =>
          this.deps.logger.warn({ err: errorMessage(error) }, 'unconfirmed sweep failed'),
        )
        .finally(() => {
          if (!this.stopController.signal.aborted) this.sweepTimer = setTimeout(sweep, interval);
        });
    };
    sweep();
    if (this.deps.consume === false) return;
    const definition = defineConsumer<SmsSubmission>({
      consumer: SMS_GATEWAY_CONSUMER,
      transport: config.sms.sink,
      sources: [config.sms.submitTopic],
      parse: (payload) => smsSubmissionSchema.parse(payload) as SmsSubmission,
      handler: gatewayConsumer({
        settings: config.sms,
        gateway: config.smsGateway,
        logger: this.deps.logger,
        queued: (smsc) => this.connections.get(smsc)?.wake(),
      }),
    });
    this.consumer = await startConsumer(
      { config, db: this.deps.db, logger: this.deps.logger },
      definition,
      config.sms.submitTopic,
      signal ?? this.stopController.signal,
      {
        concurrency: config.smsGateway.concurrency,
        ...(this.deps.consumerGroup ? { groupId: this.deps.consumerGroup } : {}),
        ...(this.deps.fromBeginning === false ? { fromBeginning: false } : {}),
      },
    );
  }

  /** Parts written longer ago than the unconfirmed window with no recorded answer: UNCONFIRMED. */
  async sweepUnconfirmed(): Promise<number> {
    const { config, db } = this.deps;
    let total = 0;
    for (;;) {
      const reports = await db.transaction(async (tx) => {
        const parts = await sweepUnconfirmed(tx, config.smsGateway.unconfirmedAfterMs, 1_000);
        if (parts.length === 0) return { parts: 0, reports: 0 };
        const written = await reportRecipients(tx, parts, {
          settings: config.sms,
          cause: 'unconfirmed sweep',
        });
        return { parts: parts.length, reports: written.length };
      });
      if (reports.parts === 0) break;
      total += reports.parts;
      this.stats.unconfirmedSwept += reports.parts;
      this.deps.logger.warn(
        { parts: reports.parts, reports: reports.reports },
        'parts written without a recorded answer past the unconfirmed window: UNCONFIRMED, never resent',
      );
      if (reports.reports > 0) this.outboxWritten();
      if (reports.parts < 1_000) break;
    }
    return total;
  }

  /**
   * Receipts recorded unmatched in the last day whose part's answer has been recorded since (by another
   * bind's transaction that could not see the receipt yet): matched and reported now.
   */
  async matchLateReceipts(): Promise<number> {
    const { config, db } = this.deps;
    const reports = await db.transaction(async (tx) => {
      const matched = await matchRecentReceipts(tx, 86_400);
      if (matched.length === 0) return [];
      return reportRecipients(tx, matched, { settings: config.sms, cause: 'late receipts' });
    });
    if (reports.length > 0) {
      this.outboxWritten();
      this.deps.logger.info(
        { reports: reports.length },
        'receipts matched after their answers were recorded',
      );
    }
    return reports.length;
  }

  /** SMSCs with their binds up and their counters. */
  status(): { name: string; transmitBinds: number; receiveBinds: number; stats: SmscConnection['stats'] }[] {
    return [...this.connections.values()].map((c) => ({
      name: c.name,
      transmitBinds: c.bindsUp.transmit,
      receiveBinds: c.bindsUp.receive,
      stats: { ...c.stats },
    }));
  }

  async stop(): Promise<void> {
    this.stopController.abort();
    await this.consumer?.stop({ timeoutMs: 30_000 });
    await Promise.all([...this.connections.values()].map((c) => c.stop()));
    if (this.sweepTimer) clearTimeout(this.sweepTimer);
    await this.sweeping;
  }
}

/** `herald sms-gateway`: runs the gateway until SIGTERM/SIGINT. */
export const smsGatewayRole: RoleDefinition<SmsGatewayConfig> = {
  summary: 'the SMPP gateway: submit topic → SMSC binds; receipts → delivery reports (ADR 0022)',
  async run(runtime, signal) {
    const { config, logger } = runtime;
    const gateway = new SmsGateway({ db: runtime.db, config, logger, wakeups: runtime.notifier });
    runtime.probes.add('smsc', () => {
      const down = gateway.status().filter((s) => s.transmitBinds === 0 || s.receiveBinds === 0);
      return down.length === 0
        ? { ok: true, detail: `${gateway.connections.size} SMSC(s) bound` }
        : { ok: false, detail: `not bound: ${down.map((s) => s.name).join(', ')}` };
    });
    try {
      try {
        await gateway.start(signal);
      } catch (error) {
        // Stopped while its consumer was still joining the group (the binds were already sending, e.g.
        // parts a killed gateway left queued): a clean stop, as for the worker's consumers.
        if (!signal.aborted) throw error;
        return;
      }
      logger.info(
        {
          smscs: config.smsGateway.smscs.map((s) => ({
            name: s.name,
            channels: s.channels,
            binds: s.binds,
            window: s.window,
            tps: s.tps,
          })),
          submitTopic: config.sms.submitTopic,
          dlrTopic: config.sms.dlrTopic,
        },
        'sms gateway started',
      );
      await aborted(signal);
    } finally {
      await gateway.stop();
      logger.info({ smscs: gateway.status(), ...gateway.stats }, 'sms gateway stopped');
    }
  },
};
