/**
 * Benchmark setup: N outbox rows (each with the event that caused it, invariant 1's foreign key)
 * written by two set-based statements in the database, so setting up a million rows takes seconds.
 * Rows look like campaign dispatch messages: the writer's standard headers and a ~300-byte payload.
 */
import type { Database } from '../../src/ports/database.js';

export const INSERT_BENCH_EVENTS = `
  insert into event (stream_type, stream_id, version, type, data, meta)
  select 'bench', 'bench-' || g, 1, 'CampaignDispatchClaimed', '{}'::jsonb,
         jsonb_build_object('correlationId', gen_random_uuid())
    from generate_series(1, $1::int) as g`;

export const INSERT_BENCH_OUTBOX = `
  insert into outbox (message_id, event_position, sink, destination, headers, payload, priority)
  select gen_random_uuid(), e.position, 'amqp', $1,
         jsonb_build_object(
           'x-herald-event-type', e.type, 'x-herald-stream-type', e.stream_type,
           'x-herald-stream-id', e.stream_id, 'x-correlation-id', e.meta ->> 'correlationId'),
         jsonb_build_object(
           'campaignId', e.stream_id, 'audienceId', gen_random_uuid(), 'organizationId', gen_random_uuid(),
           'lineOaId', 'oa-' || (e.position % 97), 'castType', 'multicast', 'claimEpoch', 1,
           'note', repeat('x', $2::int)),
         3
    from event e
   where e.stream_type = 'bench'
   order by e.position`;

export const VACUUM_OUTBOX = 'vacuum (analyze) outbox';
export const VACUUM_EVENT = 'vacuum (analyze) event';

export const SAMPLE_MESSAGE = `
  select headers, payload::text as payload_text from outbox order by id limit 1`;

export const COUNT_SENT = `select count(*)::int as sent from outbox where status = 'sent'`;

export interface SampleMessage {
  headers: Record<string, string | number | boolean>;
  payloadText: string;
}

export async function seedBenchOutbox(
  db: Database,
  options: { rows: number; destination: string; padBytes: number },
): Promise<SampleMessage> {
  await db.query(INSERT_BENCH_EVENTS, [options.rows]);
  await db.query(INSERT_BENCH_OUTBOX, [options.destination, options.padBytes]);
  await db.query(VACUUM_EVENT);
  await db.query(VACUUM_OUTBOX);
  const { rows } = await db.query<{ headers: SampleMessage['headers']; payload_text: string }>(
    SAMPLE_MESSAGE,
  );
  return { headers: rows[0]!.headers, payloadText: rows[0]!.payload_text };
}

export async function countSent(db: Database): Promise<number> {
  const { rows } = await db.query<{ sent: number }>(COUNT_SENT);
  return rows[0]!.sent;
}
