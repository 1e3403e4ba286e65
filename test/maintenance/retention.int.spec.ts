/**
 * The retention services (src/maintenance/tasks.ts) on real PostgreSQL: rows past their retention are
 * pruned, rows inside it are kept, and so is everything written while two replicas prune at once.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents } from '../../src/adapters/postgres/event-queries.js';
import { TICK_STREAM_TYPE } from '../../src/aggregates/campaign/topology.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import { toOutboxRows, writeOutbox } from '../../src/outbox/outbox-writer.js';
import { maintenanceService } from '../support/maintenance.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let config: HeraldConfig;
beforeAll(async () => {
  t = await createTestDatabase();
  config = t.config({
    HERALD_INBOX_RETENTION_DAYS: '30',
    HERALD_RECEIPT_RETENTION_DAYS: '400',
    HERALD_OUTBOX_SKIPPED_RETENTION_DAYS: '30',
    HERALD_TICK_RETENTION_DAYS: '30',
    HERALD_SMS_REPORT_RETENTION_DAYS: '90',
  });
});
afterAll(async () => t?.drop());

const count = async (sql: string, params: unknown[] = []) =>
  (await t.db.query<{ n: number }>(sql, params)).rows[0]!.n;

/** Runs two replicas of a service at once until both find nothing left. */
async function pruneWithTwoReplicas(name: string): Promise<number> {
  const replicas = [0, 1].map(() => maintenanceService(config, t.db, name, { batchSize: 100 }));
  const changed = await Promise.all(replicas.map((r) => r.runOnce()));
  return changed[0]! + changed[1]!;
}

/** Keeps inserting fresh rows until `until` settles; returns how many it wrote. */
async function writeWhile(until: Promise<unknown>, write: (n: number) => Promise<void>): Promise<number> {
  let done = false;
  until.finally(() => {
    done = true;
  });
  let n = 0;
  while (!done) await write(n++);
  return n;
}

describe('retention services', () => {
  it('inbox: settled rows past retention are deleted; recent and dead rows are kept, under concurrent writers', async () => {
    await t.db.query(
      `insert into inbox (consumer, message_id, status, processed_at)
       select 'c', 'old-' || g, case when g % 10 = 0 then 'dead' else 'processed' end, now() - interval '31 days'
         from generate_series(1, 1000) g`,
    );
    await t.db.query(
      `insert into inbox (consumer, message_id, status, processed_at)
       select 'c', 'recent-' || g, 'processed', now() - interval '29 days' from generate_series(1, 200) g`,
    );
    const pruning = pruneWithTwoReplicas('inbox-retention');
    const written = await writeWhile(pruning, async (n) => {
      await t.db.query(`insert into inbox (consumer, message_id) values ('c', $1)`, [`new-${n}`]);
    });
    expect(await pruning).toBe(900);
    expect(await count(`select count(*)::int as n from inbox where message_id like 'old-%'`)).toBe(100); // the dead ones
    expect(await count(`select count(*)::int as n from inbox where message_id like 'recent-%'`)).toBe(200);
    expect(await count(`select count(*)::int as n from inbox where message_id like 'new-%'`)).toBe(written);
  });

  it('SMS delivery reports: rolled up past retention are deleted; recent and not-yet-rolled-up ones are kept', async () => {
    const report = (prefix: string, receivedDaysAgo: number, rolledUpDaysAgo: number | null) =>
      t.db.query(
        `insert into sms_delivery_report (dlr_id, submission_id, campaign_id, recipient_id, status, received_at, rolled_up_at, outcome)
         select $1 || g, gen_random_uuid(), $2, g, 'DELIVERED', now() - make_interval(days => $3),
                case when $4::int is null then null else now() - make_interval(days => $4::int) end,
                case when $4::int is null then null else 'DELIVERED' end
           from generate_series(1, 300) g`,
        [prefix, randomUUID(), receivedDaysAgo, rolledUpDaysAgo],
      );
    await report('old-', 100, 91);
    await report('recent-', 100, 89); // received long ago, rolled up inside the retention
    await report('unrolled-', 120, null); // never deleted before the roll-up applied it
    expect(await pruneWithTwoReplicas('sms-report-retention')).toBe(300);
    const left = `select count(*)::int as n from sms_delivery_report where dlr_id like $1`;
    expect(await count(left, ['old-%'])).toBe(0);
    expect(await count(left, ['recent-%'])).toBe(300);
    expect(await count(left, ['unrolled-%'])).toBe(300);
  });

  it('publish receipts past retention are deleted, recent ones kept', async () => {
    const insert = (age: string, n: number) =>
      t.db.query(
        `insert into publish_receipt (message_id, outbox_id, event_position, sink, destination, outcome, attempts,
                                      recovery_count, confirmed_at, recorded_at)
         select gen_random_uuid(), g, g, 'amqp', 'q', 'sent', 1, 0, now(), now() - $1::interval
           from generate_series(1, $2) g`,
        [age, n],
      );
    await insert('401 days', 600);
    await insert('399 days', 50);
    const pruning = pruneWithTwoReplicas('receipt-retention');
    const written = await writeWhile(pruning, () => insert('0 days', 1).then(() => {}));
    expect(await pruning).toBe(600);
    expect(await count('select count(*)::int as n from publish_receipt')).toBe(50 + written);
  });

  it('idempotency keys are deleted once expired, never before', async () => {
    await t.db.query(
      `insert into idempotency_key (scope, key, request_hash, expires_at)
       select 's', 'expired-' || g, 'h', now() - interval '1 second' from generate_series(1, 300) g
       union all
       select 's', 'live-' || g, 'h', now() + interval '1 hour' from generate_series(1, 30) g`,
    );
    expect(await pruneWithTwoReplicas('idempotency-expiry')).toBe(300);
    expect(await count(`select count(*)::int as n from idempotency_key`)).toBe(30);
  });

  it('skipped outbox rows and tick events past retention are deleted; a tick still referenced by an outbox row is kept', async () => {
    const tick = async (minute: string, withOutbox: 'none' | 'pending' | 'skipped', ageDays: number) => {
      const meta = { correlationId: randomUUID() };
      const [appended] = await appendEvents(t.db, [
        {
          streamType: TICK_STREAM_TYPE,
          streamId: minute,
          version: 1,
          type: 'CampaignTickEmitted',
          data: { minute },
          meta,
        },
      ]);
      await t.db.query(
        `update event set recorded_at = now() - make_interval(days => $2) where position = $1`,
        [appended!.position, ageDays],
      );
      if (withOutbox === 'none') return;
      const rows = toOutboxRows(
        {
          eventPosition: appended!.position,
          eventType: 'CampaignTickEmitted',
          streamType: TICK_STREAM_TYPE,
          streamId: minute,
          meta,
        },
        [{ destination: 'process_campaign', payload: { minute } }],
      );
      await writeOutbox(t.db, rows);
      if (withOutbox === 'skipped') {
        await t.db.query(
          `update outbox set status = 'skipped', skipped_at = now() - make_interval(days => $2) where message_id = $1`,
          [rows[0]!.messageId, ageDays],
        );
      }
    };
    for (let i = 0; i < 150; i++) await tick(`2026-01-01T00:${String(i).padStart(3, '0')}`, 'none', 31);
    await tick('old-but-pending', 'pending', 31);
    await tick('old-and-skipped', 'skipped', 31);
    for (let i = 0; i < 20; i++) await tick(`recent-${i}`, 'none', 29);

    expect(await pruneWithTwoReplicas('outbox-skipped-pruning')).toBe(1);
    expect(await pruneWithTwoReplicas(`stream-retention:${TICK_STREAM_TYPE}`)).toBe(151); // 150 + the skipped one's
    const left = (
      await t.db.query<{ stream_id: string }>(
        `select stream_id from event where stream_type = $1 order by stream_id`,
        [TICK_STREAM_TYPE],
      )
    ).rows.map((r) => r.stream_id);
    expect(left).toEqual(['old-but-pending', ...Array.from({ length: 20 }, (_, i) => `recent-${i}`).sort()]);
    // Only side streams that declare a retention are pruned: campaign events are never touched.
    expect(
      await count(`select count(*)::int as n from event where stream_type <> $1`, [TICK_STREAM_TYPE]),
    ).toBe(0);
  });
});
