/**
 * The read paths whose index migration 000022 replaced or narrowed (ADR 0032: fewer writes per item)
 * still read through an index, never a sequential scan of the event log or of the action table: the
 * export's and side-stream retention's time ranges (event_recorded_at_brin instead of the B-tree), and
 * an organization's action list with each status filter (the partial "resting" index, the processing
 * index, or the (organization_id, execute_at, id) index), and replay's look-ups of a message's inbox
 * records (the primary key) and of an event's receipts (a BRIN index of small ranges). Plans are taken with the queries' own text and
 * parameters, as the application sends them (unnamed statements: custom plans), on seeded tables large
 * enough for the planner to prefer an index where one serves (100,000 events, 30,000 actions, 100,000
 * inbox records, ~50,000 receipts, analyzed).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MESSAGES_IN_FLIGHT } from '../../src/adapters/postgres/claim-liveness-queries.js';
import { EXPORT_EVENTS } from '../../src/adapters/postgres/event-queries.js';
import { RECEIPTS_FOR_EVENTS } from '../../src/adapters/postgres/receipt-queries.js';
import { INBOX_FOR_MESSAGES } from '../../src/adapters/postgres/replay-queries.js';
import { PRUNE_STREAM_EVENTS } from '../../src/adapters/postgres/retention-queries.js';
import { LIST_ORGANIZATION_ACTIONS } from '../../src/adapters/postgres/scheduled-action-queries.js';
import { TICK_STREAM_TYPE } from '../../src/aggregates/campaign/topology.js';
import { ACTION_STATUSES } from '../../src/domain/scheduled-action/status.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
  // 100,000 events over the last 60 days in append order (recorded_at grows with position), a third of
  // them the per-minute tick's side stream.
  await t.db.query(
    `insert into event (stream_type, stream_id, version, type, data, recorded_at)
     select case when i % 3 = 0 then $1 else 'campaign' end, 's-' || (i / 10), i % 10 + 1, 'Happened',
            jsonb_build_object('i', i), now() - interval '60 days' + i * interval '51 seconds'
       from generate_series(1, 100000) as i`,
    [TICK_STREAM_TYPE],
  );
  // 30,000 actions of 30 organizations: mostly done, a backlog pending, a few in flight, failed or
  // cancelled.
  await t.db.query(
    `insert into scheduled_action (id, organization_id, mode, action_type, action_config, status, execute_at,
                                   max_retries, retry_count, fired_now, expired, due_because, claim_epoch,
                                   claimed_at, created_at, status_changed_at, version)
     select gen_random_uuid(), 'org-' || (i % 30), 'normal', 'send_message', '{"text":"x"}'::jsonb,
            case when i % 100 < 90 then 'done' when i % 100 < 97 then 'pending' when i % 100 = 97 then 'processing'
                 when i % 100 = 98 then 'failed' else 'cancelled' end,
            now() - interval '30 days' + i * interval '1 minute', 3, 0, false, false, 'delay', 1,
            case when i % 100 = 97 then now() end, now(), now(), 2
       from generate_series(1, 30000) as i`,
  );
  // 100,000 inbox records of 5 consumers, and a receipt per event of the last 30 days, appended in
  // position order as the relay marks rows.
  await t.db.query(
    `insert into inbox (consumer, message_id, received_at, processed_at)
     select 'consumer-' || (i % 5), 'm-' || i, now() - interval '30 days' + i * interval '25 seconds',
            now() - interval '30 days' + i * interval '25 seconds'
       from generate_series(1, 100000) as i`,
  );
  await t.db.query(
    `insert into publish_receipt (message_id, outbox_id, event_position, sink, destination, outcome, attempts,
                                  recovery_count, confirmed_at, recorded_at)
     select gen_random_uuid(), position, position, 'amqp', 'q', 'sent', 1, 0, recorded_at, recorded_at
       from event where recorded_at > now() - interval '30 days' order by position`,
  );
  for (const table of ['event', 'scheduled_action', 'inbox', 'publish_receipt'])
    await t.db.query(`analyze ${table}`);
});
afterAll(async () => t?.drop());

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Subplan Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

async function plan(query: string, params: unknown[]): Promise<PlanNode> {
  const { rows } = await t.db.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
    `explain (format json) ${query}`,
    params,
  );
  return rows[0]!['QUERY PLAN'][0].Plan;
}

function nodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodes)];
}

/** The sequential scans of `relation` in the plan, and the indexes it reads (for the failure message). */
function scans(root: PlanNode, relation: string) {
  const all = nodes(root);
  return {
    seqScans: all.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === relation).length,
    indexes: all.flatMap((n) => (n['Index Name'] ? [n['Index Name']] : [])),
  };
}

describe('read paths after migration 000022 (ADR 0032)', () => {
  it('export of an hour of events reads the BRIN range, not the whole log', async () => {
    const { rows } = await t.db.query<{ from: string; to: string }>(
      `select (now() - interval '3 days')::text as from, (now() - interval '3 days' + interval '1 hour')::text as to`,
    );
    const result = scans(await plan(EXPORT_EVENTS, [rows[0]!.from, rows[0]!.to, null]), 'event');
    expect(result).toMatchObject({ seqScans: 0, indexes: ['event_recorded_at_brin'] });
  });

  it('side-stream retention finds old tick events without a sequential scan of the log', async () => {
    // The look-up of what to prune (the `prunable` CTE) is the read the time index serves; the delete
    // that follows joins its rows back to the log by position (not a read of recorded_at).
    const root = await plan(PRUNE_STREAM_EVENTS, [TICK_STREAM_TYPE, 59, 1000]);
    const prunable = nodes(root).find((n) => n['Subplan Name'] === 'CTE prunable');
    expect(prunable, JSON.stringify(root)).toBeDefined();
    const result = scans(prunable!, 'event');
    expect(result.seqScans, JSON.stringify(prunable)).toBe(0);
    expect(result.indexes).toContain('event_recorded_at_brin');
  });

  it.each([null, ...ACTION_STATUSES])(
    'an organization’s actions with status %s are listed through an index',
    async (status) => {
      const root = await plan(LIST_ORGANIZATION_ACTIONS, ['org-7', status, null, null, null, 50, null, null]);
      const result = scans(root, 'scheduled_action');
      expect(result.seqScans, JSON.stringify(root)).toBe(0);
      expect(result.indexes.length).toBeGreaterThan(0);
      // The statuses an action rests in (a backlog, or few among many done ones) are an index condition,
      // not a filter over the organization's whole history.
      if (status === 'pending' || status === 'failed' || status === 'cancelled') {
        const conditions = nodes(root).map((n) => n['Index Cond'] ?? '');
        expect(
          conditions.some((c) => c.includes('status')),
          JSON.stringify(root),
        ).toBe(true);
      }
    },
  );

  it('replay finds a message’s inbox records through the primary key, not a scan of the inbox', async () => {
    const result = scans(await plan(INBOX_FOR_MESSAGES, [['m-70001', 'm-70002']]), 'inbox');
    expect(result.seqScans).toBe(0);
    expect(new Set(result.indexes)).toEqual(new Set(['inbox_pkey']));
  });

  it('replay finds an event’s receipts through the BRIN range, not a scan of the receipts', async () => {
    const { rows } = await t.db.query<{ position: string }>(
      `select position::text from event where recorded_at > now() - interval '10 days' order by position limit 2`,
    );
    const root = await plan(RECEIPTS_FOR_EVENTS, [rows.map((r) => r.position)]);
    const result = scans(root, 'publish_receipt');
    expect(result.seqScans, JSON.stringify(root)).toBe(0);
    expect(result.indexes).toContain('publish_receipt_event_position_brin');
  });

  it('stale recovery asks whether a sent message was settled through the inbox’s primary key', async () => {
    const root = await plan(MESSAGES_IN_FLIGHT, [[randomUUID(), randomUUID()], 600_000]);
    const result = scans(root, 'inbox');
    expect(result.seqScans, JSON.stringify(root)).toBe(0);
    expect(new Set(result.indexes.filter((i) => i.startsWith('inbox')))).toEqual(new Set(['inbox_pkey']));
  });
});
