/**
 * Verify benchmark setup: N campaign streams of five realistic events each (Created, Scheduled,
 * Claimed, Heartbeat, Completed — the JSON the decider writes, canonical ISO times, uuid v4 ids,
 * correlation/actor/pod metadata) and the matching COMPLETED state rows, written by set-based
 * statements so a million events take seconds to a minute. Events are inserted in time order (each
 * campaign's lifecycle spans ~66 minutes, campaigns start a second apart), so one stream's events are
 * spread through the heap the way a live log spreads them.
 */
import type { Database } from '../../src/ports/database.js';

/** A deterministic uuid v4 (version and variant nibbles fixed) for campaign number i. */
const uuidOf = (i: string) =>
  `(substr(md5('bench-campaign-' || ${i}), 1, 12) || '4' || substr(md5('bench-campaign-' || ${i}), 14, 3) || '8' ||
    substr(md5('bench-campaign-' || ${i}), 18, 15))::uuid`;

const iso = (ts: string) => `to_char((${ts}) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** $1 = campaigns. Times: created at t0, scheduled +1 s for +1 h, claimed +1 h, heartbeat +1 h 5 min, completed +1 h 6 min. */
export const INSERT_CAMPAIGN_EVENTS = `
  with c as (
    select g as i, ${uuidOf('g')} as id,
           timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => g) as t0,
           case when g % 2 = 0 then 'broadcast' else 'multicast' end as cast_type
      from generate_series(1, $1::int) as g
  ), e as (
    select c.id, 1 as version, 'CampaignCreated' as type, c.t0 as at,
           jsonb_build_object('campaignId', c.id, 'organizationId', 'org-' || (c.i % 50), 'channel', 'line',
             'castType', c.cast_type, 'audienceId', case when c.cast_type = 'multicast' then 'aud-' || c.i end,
             'lineOaId', 'oa-' || (c.i % 7), 'name', 'bench campaign ' || c.i, 'startAt', null,
             'dispatchDeadline', null, 'idempotencyKey', null, 'mode', 'draft', 'at', ${iso('c.t0')}) as data
      from c
    union all
    select c.id, 2, 'CampaignScheduled', c.t0 + interval '1 second',
           jsonb_build_object('startAt', ${iso("c.t0 + interval '1 hour'")}, 'dispatchDeadline', null,
             'at', ${iso("c.t0 + interval '1 second'")})
      from c
    union all
    select c.id, 3, 'CampaignClaimed', c.t0 + interval '1 hour',
           jsonb_build_object('epoch', 1, 'claimedAt', ${iso("c.t0 + interval '1 hour'")}, 'trigger', 'scanner')
      from c
    union all
    select c.id, 4, 'CampaignHeartbeat', c.t0 + interval '65 minutes',
           jsonb_build_object('epoch', 1, 'claimedAt', ${iso("c.t0 + interval '65 minutes'")})
      from c
    union all
    select c.id, 5, 'CampaignCompleted', c.t0 + interval '66 minutes',
           jsonb_build_object('epoch', 1, 'at', ${iso("c.t0 + interval '66 minutes'")})
      from c
  )
  insert into event (stream_type, stream_id, version, type, data, meta, recorded_at)
  select 'campaign', e.id::text, e.version, e.type, e.data,
         jsonb_build_object('correlationId', gen_random_uuid(), 'actor', 'bench', 'pod', 'bench-pod'), e.at
    from e
   order by e.at, e.id`;

export const INSERT_CAMPAIGN_ROWS = `
  insert into campaign (id, organization_id, channel, cast_type, audience_id, line_oa_id, name, idempotency_key,
                        status, start_at, dispatch_deadline, claim_epoch, claimed_at, paused_from, deleted_at,
                        resend_attempt, failure_reason, created_at, status_changed_at, version)
  select ${uuidOf('g')}, 'org-' || (g % 50), 'line', case when g % 2 = 0 then 'broadcast' else 'multicast' end,
         case when g % 2 = 1 then 'aud-' || g end, 'oa-' || (g % 7), 'bench campaign ' || g, null,
         'COMPLETED', t0 + interval '1 hour', null, 1, null, null, null, 0, null, t0, t0 + interval '66 minutes', 5
    from generate_series(1, $1::int) as g,
         lateral (select timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => g) as t0) as t`;

/** Hand-corrupts every k-th row's status (a row stuck before its claim). */
export const CORRUPT_ROWS = `
  update campaign set status = 'SCHEDULED'
   where id in (select ${uuidOf('g')} from generate_series(1, $1::int) as g where g % $2::int = 0)`;

export async function seedCampaignStreams(db: Database, campaigns: number): Promise<void> {
  await db.query(INSERT_CAMPAIGN_EVENTS, [campaigns]);
  await db.query(INSERT_CAMPAIGN_ROWS, [campaigns]);
  await db.query('vacuum (analyze) event');
  await db.query('vacuum (analyze) campaign');
}

export async function corruptRows(db: Database, campaigns: number, every: number): Promise<number> {
  const { rowCount } = await db.query(CORRUPT_ROWS, [campaigns, every]);
  return rowCount;
}
