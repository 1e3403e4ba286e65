/**
 * Benchmark setup: N outbox rows (each with the event that caused it, invariant 1's foreign key)
 * written by two set-based statements in the database, so setting up a million rows takes seconds.
 * Rows look like campaign dispatch messages: the writer's standard headers and a ~300-byte payload,
 * partition key = the stream id (the writer's default). For the Kafka bench, `sink` picks the sink and
 * `orderedKeys` > 0 makes the rows ordered (ADR 0007) over that many keys, row i on key i % keys.
 */
import type { Database } from '../../src/ports/database.js';

export const INSERT_BENCH_EVENTS = `
  insert into event (stream_type, stream_id, version, type, data, meta)
  select 'bench', 'bench-' || g, 1, 'CampaignDispatchClaimed', '{}'::jsonb,
         jsonb_build_object('correlationId', gen_random_uuid())
    from generate_series(1, $1::int) as g`;

export const INSERT_BENCH_OUTBOX = `
  insert into outbox (message_id, event_position, sink, destination, headers, payload, priority,
                      partition_key, ordered)
  select gen_random_uuid(), e.position, $3, $1,
         jsonb_build_object(
           'x-herald-event-type', e.type, 'x-herald-stream-type', e.stream_type,
           'x-herald-stream-id', e.stream_id, 'x-correlation-id', e.meta ->> 'correlationId'),
         jsonb_build_object(
           'campaignId', e.stream_id, 'audienceId', gen_random_uuid(), 'organizationId', gen_random_uuid(),
           'lineOaId', 'oa-' || (e.position % 97), 'castType', 'multicast', 'claimEpoch', 1,
           'note', repeat('x', $2::int)),
         3,
         case when $4::int > 0 then 'key-' || (e.position % $4::int) else e.stream_id end,
         $4::int > 0
    from event e
   where e.stream_type = 'bench'
   order by e.position`;

export const VACUUM_OUTBOX = 'vacuum (analyze) outbox';
export const VACUUM_EVENT = 'vacuum (analyze) event';

export const SAMPLE_MESSAGE = `
  select headers, payload::text as payload_text, partition_key from outbox order by id limit 1`;

export const COUNT_SENT = `select count(*)::int as sent from outbox where status = 'sent'`;

export interface SampleMessage {
  headers: Record<string, string | number | boolean>;
  payloadText: string;
  partitionKey: string | null;
}

export async function seedBenchOutbox(
  db: Database,
  options: {
    rows: number;
    destination: string;
    padBytes: number;
    sink?: 'amqp' | 'kafka';
    orderedKeys?: number;
  },
): Promise<SampleMessage> {
  await db.query(INSERT_BENCH_EVENTS, [options.rows]);
  await db.query(INSERT_BENCH_OUTBOX, [
    options.destination,
    options.padBytes,
    options.sink ?? 'amqp',
    options.orderedKeys ?? 0,
  ]);
  await db.query(VACUUM_EVENT);
  await db.query(VACUUM_OUTBOX);
  const { rows } = await db.query<{
    headers: SampleMessage['headers'];
    payload_text: string;
    partition_key: string | null;
  }>(SAMPLE_MESSAGE);
  return {
    headers: rows[0]!.headers,
    payloadText: rows[0]!.payload_text,
    partitionKey: rows[0]!.partition_key,
  };
}

export async function countSent(db: Database): Promise<number> {
  const { rows } = await db.query<{ sent: number }>(COUNT_SENT);
  return rows[0]!.sent;
}
