/** Fixtures for campaign tests: a service wired to a test database, and campaign inputs. */
import { randomUUID } from 'node:crypto';
import { CampaignService } from '../../src/aggregates/campaign/service.js';
import type { LineDeliveryStep } from '../../src/domain/campaign/commands.js';
import type { CampaignCommand } from '../../src/domain/campaign.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import type { Database } from '../../src/ports/database.js';

export function campaignService(db: Database): CampaignService {
  return new CampaignService({ db, handler: new CommandHandler({ db, pod: 'test' }) });
}

export function lineCampaign(overrides: Record<string, unknown> = {}) {
  return {
    mode: 'draft' as const,
    organizationId: 'org-1',
    channel: 'line' as const,
    castType: 'multicast' as const,
    audienceId: 'aud-1',
    lineOaId: 'oa-1',
    line: { messages: [{ type: 'text' as const, text: 'test campaign' }] },
    name: 'test campaign',
    ...overrides,
  };
}

/** A time `ms` after the database's now(), for schedules (time comes from the database, invariant 6). */
export async function dbTimePlus(db: Database, ms: number): Promise<Date> {
  const { rows } = await db.query<{ at: Date }>('select now() + make_interval(secs => $1 / 1000.0) as at', [
    ms,
  ]);
  return rows[0]!.at;
}

/**
 * The campaign's live claim message was published and the consumer dead-lettered it (its attempts ran
 * out): the claim's liveness no longer rests on a message in flight, so stale recovery may take it.
 */
export async function deadLetterClaimMessage(db: Database, campaignId: string): Promise<void> {
  const { rows } = await db.query<{ message_id: string }>(
    `update outbox o set status = 'sent', sent_at = now(), locked_until = null
       from event e
      where e.position = o.event_position and e.stream_type = 'campaign' and e.stream_id = $1
        and o.status = 'pending'
     returning o.message_id::text`,
    [campaignId],
  );
  for (const { message_id } of rows) {
    await db.query(
      `insert into inbox (consumer, message_id, status, attempts, error) values ('line-delivery', $1, 'dead', 5, 'test: attempts exhausted')`,
      [message_id],
    );
  }
}

/**
 * The commands a LINE delivery records for a one-chunk campaign LINE accepted (plan, chunk 0), then its
 * completion, under `epoch`: for tests that need a COMPLETED campaign without a LINE call.
 */
export function lineDeliveryCompletion(
  campaignId: string,
  epoch: number,
  castType: 'broadcast' | 'multicast' | 'narrowcast' = 'multicast',
): ((now: Date) => CampaignCommand)[] {
  const multicast = castType === 'multicast';
  const advance =
    (step: LineDeliveryStep) =>
    (now: Date): CampaignCommand => ({ type: 'AdvanceLineDelivery', campaignId, epoch, now, step });
  return [
    advance({ type: 'plan', chunks: 1, recipients: multicast ? 3 : null }),
    advance({
      type: 'accepted',
      chunk: 0,
      recipients: multicast ? 3 : null,
      cursor: multicast ? 'U00000000000000000000000000000003' : null,
      requestId: randomUUID(),
      acceptedRequestId: null,
    }),
    (now) => ({ type: 'CompleteCampaign', campaignId, epoch, now }),
  ];
}
