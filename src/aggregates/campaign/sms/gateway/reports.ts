/**
 * The gateway's delivery reports (ADR 0022): after any change to parts, the recipients they belong to are
 * looked at again; a recipient whose outcome is decided (smpp-outcome.ts `recipientReport`) gets its one
 * report, recorded in `sms_gateway_report` and written as an outbox row to the DLR topic in the caller's
 * transaction, caused by one `SmsGatewayReported` event on the gateway's side stream (invariant 1; only
 * the relay publishes it: invariant 2). The row's message id is the report's dlrId, derived from the
 * submission and recipient like the simulator's, so the DLR consumer's inbox and table take it once
 * (invariant 4). Its remaining queued parts are withdrawn in the same statement: nothing more goes out
 * for a recipient once its outcome is decided.
 */
import { randomUUID } from 'node:crypto';
import { appendEvents } from '../../../../adapters/postgres/event-queries.js';
import {
  type DecidedReport,
  insertReports,
  partsOfRecipients,
} from '../../../../adapters/postgres/sms-gateway-queries.js';
import {
  type GatewayReportStatus,
  type PartOutcome,
  recipientReport,
} from '../../../../domain/sms/smpp-outcome.js';
import { HEADER } from '../../../../messaging/headers.js';
import { derivedMessageId, toOutboxRows, writeOutbox } from '../../../../outbox/outbox-writer.js';
import type { SqlClient } from '../../../../ports/database.js';
import type { SmsSettings } from '../settings.js';
import type { DeliveryReport } from '../simulator.js';

/** The gateway's side stream: one event per transaction that wrote reports. */
export const SMS_GATEWAY_STREAM_TYPE = 'sms_gateway';
export const SMS_GATEWAY_REPORTED = 'SmsGatewayReported';

/** A DeliveryReport as the gateway writes it (SEND_FAILED for a submission it withdrew unsent). */
export type GatewayDeliveryReport = Omit<DeliveryReport, 'status'> & { status: GatewayReportStatus };

export interface ReportContext {
  settings: Pick<SmsSettings, 'sink' | 'dlrTopic'>;
  /** What wrote them (`receipts`, `responses`, `unconfirmed sweep`, `consumer`), for the event and logs. */
  cause: string;
  smsc?: string | undefined;
  correlationId?: string | undefined;
}

function partOutcome(p: Awaited<ReturnType<typeof partsOfRecipients>>[number]['parts'][number]): PartOutcome {
  return {
    state: p.state,
    commandStatus: p.commandStatus,
    receipt: p.receiptStatus
      ? { outcome: p.receiptStatus as GatewayReportStatus, errorCode: p.receiptError }
      : null,
    reason: p.withdrawnReason,
  };
}

/**
 * Decides and writes the reports of these recipients that are decided now; returns the reports written.
 * Also takes reports decided elsewhere (`decided`: a chunk for a route without an SMSC).
 */
export async function reportRecipients(
  tx: SqlClient,
  recipients: readonly { submissionId: string; recipientId: string }[],
  context: ReportContext,
  decided: readonly DecidedReport[] = [],
): Promise<GatewayDeliveryReport[]> {
  const unique = new Map(recipients.map((r) => [`${r.submissionId}/${r.recipientId}`, r]));
  const reports: DecidedReport[] = [...decided];
  for (const recipient of await partsOfRecipients(tx, [...unique.values()])) {
    const report = recipientReport(recipient.parts.map(partOutcome));
    if (report) reports.push({ ...recipient, status: report.status, errorCode: report.errorCode });
  }
  const inserted = await insertReports(tx, reports);
  if (inserted.length === 0) return [];
  const streamId = randomUUID();
  const counts: Record<string, number> = {};
  for (const r of inserted) counts[r.status] = (counts[r.status] ?? 0) + 1;
  const meta = { actor: 'sms-gateway', correlationId: context.correlationId ?? streamId };
  const [event] = await appendEvents(tx, [
    {
      streamType: SMS_GATEWAY_STREAM_TYPE,
      streamId,
      version: 1,
      type: SMS_GATEWAY_REPORTED,
      data: { cause: context.cause, smsc: context.smsc ?? null, reports: inserted.length, statuses: counts },
      meta,
    },
  ]);
  const payloads: GatewayDeliveryReport[] = inserted.map((r) => ({
    dlrId: derivedMessageId('sms_dlr', r.submissionId, r.recipientId),
    submissionId: r.submissionId,
    campaignId: r.campaignId,
    organizationId: r.organizationId,
    recipientId: r.recipientId,
    msisdn: r.msisdn,
    operator: r.operator,
    status: r.status as GatewayReportStatus,
    errorCode: r.errorCode,
    epoch: r.epoch,
    receivedAt: r.receivedAt.toISOString(),
    doneAt: r.reportedAt.toISOString(),
  }));
  const byOrganization = new Map<string, GatewayDeliveryReport[]>();
  for (const report of payloads) {
    byOrganization.set(report.organizationId, [...(byOrganization.get(report.organizationId) ?? []), report]);
  }
  const rows = [...byOrganization].flatMap(([organizationId, reportsOfOrganization]) =>
    toOutboxRows(
      {
        eventPosition: event!.position,
        eventType: SMS_GATEWAY_REPORTED,
        streamType: SMS_GATEWAY_STREAM_TYPE,
        streamId,
        meta,
        organizationId,
      },
      reportsOfOrganization.map((report) => ({
        messageId: report.dlrId,
        sink: context.settings.sink,
        destination: context.settings.dlrTopic,
        partitionKey: report.campaignId,
        payload: report,
        priority: 5,
        headers: { [HEADER.organizationId]: report.organizationId, [HEADER.epoch]: report.epoch },
      })),
    ),
  );
  await writeOutbox(tx, rows);
  return payloads;
}
