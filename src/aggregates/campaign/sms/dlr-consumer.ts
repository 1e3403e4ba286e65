/**
 * The delivery-report (DLR) consumer of `herald worker`: each report on HERALD_SMS_DLR_TOPIC is stored in
 * `sms_delivery_report` in the inbox transaction, de-duplicated by its dlrId in the inbox and in the table,
 * so a report redelivered under another message id is still stored once (invariant 4); then the roll-up is
 * woken (its poll covers a lost notification: invariant 7). It only records; the roll-up classifies. A
 * report of another shape is dead-lettered at once. With HERALD_SMS_SINK=amqp the topic is a RabbitMQ
 * queue, written by a gateway adapter (the simulator speaks Kafka only). ADR 0019.
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
  // SEND_FAILED: never handed to the operator. The roll-up writes it for a dead submission; the SMPP
  // gateway reports it for a submission it withdrew unsent (its campaign paused or cancelled, ADR 0022).
  status: z.enum([...DLR_OUTCOMES, 'SEND_FAILED']),
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
