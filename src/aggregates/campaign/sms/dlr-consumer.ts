/**
 * The delivery-report (DLR) consumer `herald worker` runs (a registry consumer on the consumer toolkit):
 * each report the SMS gateway (or `herald sms-simulator`) writes to HERALD_SMS_DLR_TOPIC is stored in
 * `sms_delivery_report` in the inbox transaction (inbox by the report's dlrId, the message id; the
 * insert is `on conflict do nothing` by dlr_id too, so a report redelivered under another message id
 * is still stored once: invariant 4), then the roll-up is woken (NOTIFY on the due channel; the
 * roll-up's poll covers a lost notification: invariant 7). The consumer only records: classification,
 * retries, counters and refunds are the roll-up's (rollup.ts), under its lease.
 *
 * A report that does not have the simulator's DeliveryReport shape is a DeadLetterError: dead-lettered
 * at once by the toolkit (`<topic>.dead`, where an operator can inspect and re-drive it), never retried
 * in a loop. The transport follows HERALD_SMS_SINK like the submit topic: Kafka by default, a RabbitMQ
 * queue named like the topic with `amqp` (the simulator itself speaks Kafka only, so an amqp deployment
 * uses a gateway adapter that writes the same report shape to that queue).
 */
import { z } from 'zod';
import { insertDeliveryReports } from '../../../adapters/postgres/sms-delivery-queries.js';
import { DeadLetterError } from '../../../errors.js';
import type { SqlClient } from '../../../ports/database.js';
import { channels, type WakeupSignal } from '../../../ports/wakeups.js';
import type { ConsumedMessage, Handler } from '../../../worker/consume.js';
import { type DeliveryReport, DLR_OUTCOMES } from './simulator.js';

/** The inbox name of the DLR consumer (and its Kafka consumer group). */
export const SMS_DLR_CONSUMER = 'sms-dlr';

const digits = z.string().regex(/^[1-9][0-9]{0,18}$/, 'a recipient id (a positive integer)');
const instant = z.iso.datetime({ offset: true });

/** The simulator's DeliveryReport (ADR 0014): what any gateway adapter writes to the DLR topic. */
export const deliveryReportSchema = z.object({
  dlrId: z.string().min(1).max(200),
  submissionId: z.uuid(),
  campaignId: z.uuid(),
  organizationId: z.string().min(1),
  recipientId: z.union([digits, z.number().int().positive().transform(String)]),
  msisdn: z.string().min(1),
  operator: z.string().min(1),
  // A gateway never reports SEND_FAILED: that one is synthetic (a dead submission).
  status: z.enum(DLR_OUTCOMES),
  errorCode: z.string().max(200).nullable(),
  epoch: z.number().int().nonnegative(),
  receivedAt: instant,
  doneAt: instant,
});

export type ParsedDeliveryReport = z.output<typeof deliveryReportSchema>;

/** Validates one report; a malformed one is a DeadLetterError naming the field. */
export function parseDeliveryReport(payload: unknown): ParsedDeliveryReport {
  const result = deliveryReportSchema.safeParse(payload);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new DeadLetterError(
    `malformed delivery report: ${issue.path.join('.') || '(root)'}: ${issue.message}`,
    { field: issue.path.join('.'), rule: issue.code },
  );
}

export interface DlrConsumerDeps {
  schema: string;
  wakeups?: WakeupSignal | undefined;
}

/**
 * The handler: validate, store (idempotent by dlr_id), wake the roll-up after commit. The payload is
 * taken as JSON by the toolkit (no `parse`) and validated here, so a malformed report is dead-lettered
 * (an operator can re-drive it) rather than only rejected.
 */
export function dlrHandler(deps: DlrConsumerDeps): Handler<unknown> {
  return async (message: ConsumedMessage<unknown>, tx: SqlClient) => {
    const report = parseDeliveryReport(message.payload);
    await insertDeliveryReports(tx, [
      {
        dlrId: report.dlrId,
        submissionId: report.submissionId,
        campaignId: report.campaignId,
        recipientId: report.recipientId,
        status: report.status,
        errorCode: report.errorCode,
        epoch: report.epoch,
        doneAt: report.doneAt,
      },
    ]);
    message.afterCommit(() => deps.wakeups?.signal(channels.due(deps.schema)));
    return 'processed';
  };
}

export type { DeliveryReport };
