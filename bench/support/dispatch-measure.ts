/**
 * What the dispatch benchmark measures, all from the database's own timestamps (invariant 6: the
 * roles run in other processes, so only the database clock is common to all of them):
 * - due: campaign.start_at;
 * - claimed: the claim transaction's now() (event.recorded_at of CampaignClaimed = outbox.created_at);
 * - published: outbox.sent_at, the now() of the relay's mark statement, which runs after the broker's
 *   confirm.
 * And the floor those are compared with: one trivial transaction plus one publish with its confirm.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { queueOptions } from '../../src/adapters/amqp/amqp-connection.js';
import type { Database } from '../../src/ports/database.js';
import { WARM_UP_ORGANIZATION } from './dispatch-setup.js';
import type { CampaignTimes } from './dispatch-stages.js';

export interface Distribution {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  min: number;
}

/** Nearest-rank percentiles of `values` (ms). */
export function distribution(values: readonly number[]): Distribution {
  if (values.length === 0) throw new Error('no samples');
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return {
    n: sorted.length,
    p50: at(50),
    p90: at(90),
    p99: at(99),
    max: sorted[sorted.length - 1]!,
    min: sorted[0]!,
  };
}

export const ms = (value: number) => value.toFixed(1);
export const describe = (d: Distribution) =>
  `p50=${ms(d.p50)} p99=${ms(d.p99)} (p90=${ms(d.p90)} min=${ms(d.min)} max=${ms(d.max)} ms, n=${d.n})`;

/** Per dispatch message: due → claim transaction, due → published (ms). */
export const DISPATCH_TIMES = `
  select (extract(epoch from (o.created_at - c.start_at)) * 1000)::float8 as due_to_claim,
         (extract(epoch from (o.sent_at - c.start_at)) * 1000)::float8 as due_to_sent,
         (extract(epoch from (o.sent_at - o.created_at)) * 1000)::float8 as claim_to_sent
    from outbox o
    join campaign c on c.id = (o.payload ->> 'campaignId')::uuid
   where o.status = 'sent' and c.organization_id <> '${WARM_UP_ORGANIZATION}'`;

/** Claim transactions: their now() (all claims of one transaction share it), size and scanner. */
export const CLAIM_TRANSACTIONS = `
  select (extract(epoch from e.recorded_at) * 1000)::float8 as at_ms, count(*)::int as claims,
         e.meta ->> 'pod' as pod
    from event e
    join campaign c on c.id = e.stream_id::uuid
   where e.type = 'CampaignClaimed' and c.organization_id <> '${WARM_UP_ORGANIZATION}'
   group by e.recorded_at, e.meta ->> 'pod' order by e.recorded_at`;

/** Every campaign's times (epoch ms, database clock) and ids, for --dump. */
export const CAMPAIGN_TIMES = `
  select c.id as campaign_id, o.id as outbox_id, o.message_id, c.organization_id = '${WARM_UP_ORGANIZATION}' as warm_up,
         (extract(epoch from c.start_at) * 1000)::float8 as due_ms,
         (extract(epoch from o.created_at) * 1000)::float8 as claimed_ms,
         (extract(epoch from o.sent_at) * 1000)::float8 as sent_ms
    from outbox o
    join campaign c on c.id = (o.payload ->> 'campaignId')::uuid
   order by c.start_at, o.id`;

export async function campaignTimes(db: Database): Promise<CampaignTimes[]> {
  return (await db.query<CampaignTimes>(CAMPAIGN_TIMES)).rows;
}

export const OUTBOX_PROGRESS = `
  select count(*) filter (where status = 'sent')::int as sent,
         count(*) filter (where status = 'dead')::int as dead,
         count(*)::int as total
    from outbox`;

export const CHECK_CLAIMS = `
  select count(*)::int as campaigns,
         count(*) filter (where status = 'DISPATCHING' and claim_epoch = 1)::int as claimed_once,
         (select count(*)::int from event where type = 'CampaignClaimed') as claim_events
    from campaign`;

export interface DispatchTimes {
  dueToClaim: number[];
  dueToSent: number[];
  claimToSent: number[];
}

export async function dispatchTimes(db: Database): Promise<DispatchTimes> {
  const { rows } = await db.query<{ due_to_claim: number; due_to_sent: number; claim_to_sent: number }>(
    DISPATCH_TIMES,
  );
  return {
    dueToClaim: rows.map((r) => r.due_to_claim),
    dueToSent: rows.map((r) => r.due_to_sent),
    claimToSent: rows.map((r) => r.claim_to_sent),
  };
}

export interface ClaimTransaction {
  at_ms: number;
  claims: number;
  pod: string;
}

export async function claimTransactions(db: Database): Promise<ClaimTransaction[]> {
  const { rows } = await db.query<ClaimTransaction>(CLAIM_TRANSACTIONS);
  return rows;
}

/**
 * Claims per second from the claim transactions' timestamps (their now(), i.e. when each began), per
 * scanner and summed: a scanner's transactions run one after another, so the claims of all but its last
 * transaction were made between its first transaction's start and its last one's (like (n − 1) /
 * (t_last − t_first) for single events). Scanners run side by side, so one span over all of them would
 * count both scanners' last transactions as done. A scanner with a single transaction adds nothing
 * (give each scanner several batches' worth); NaN when none ran two.
 */
export function claimsPerSecond(transactions: readonly ClaimTransaction[]): number {
  const byPod = new Map<string, ClaimTransaction[]>();
  for (const t of transactions) byPod.set(t.pod, [...(byPod.get(t.pod) ?? []), t]);
  let perSecond = Number.NaN;
  for (const own of byPod.values()) {
    if (own.length < 2) continue;
    const claims = own.slice(0, -1).reduce((sum, t) => sum + t.claims, 0);
    const rate = (claims / (own[own.length - 1]!.at_ms - own[0]!.at_ms)) * 1000;
    perSecond = Number.isNaN(perSecond) ? rate : perSecond + rate;
  }
  return perSecond;
}

/**
 * Polls until `expected` outbox rows are sent (throws on dead rows or after `timeoutMs`); runs
 * `check` about once a second (it throws to abort the wait).
 */
export async function waitForSent(
  db: Database,
  expected: number,
  timeoutMs: number,
  check?: () => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let poll = 1; ; poll++) {
    if (check && poll % 4 === 0) await check();
    const { rows } = await db.query<{ sent: number; dead: number; total: number }>(OUTBOX_PROGRESS);
    const progress = rows[0]!;
    if (progress.dead > 0) throw new Error(`${progress.dead} outbox rows are dead`);
    if (progress.sent >= expected) return;
    if (Date.now() > deadline) {
      throw new Error(`timed out: ${progress.sent} of ${expected} sent (${progress.total} outbox rows)`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export async function checkClaims(db: Database, expected: number): Promise<void> {
  const { rows } = await db.query<{ campaigns: number; claimed_once: number; claim_events: number }>(
    CHECK_CLAIMS,
  );
  const check = rows[0]!;
  if (check.campaigns !== expected || check.claimed_once !== expected || check.claim_events !== expected) {
    throw new Error(
      `expected ${expected} campaigns each claimed once, got ${JSON.stringify(check)} (a reclaim or a double claim?)`,
    );
  }
}

/**
 * The floor for due → published: one trivial transaction (BEGIN; SELECT now(); COMMIT) on the
 * benchmark's pool, then one persistent, mandatory publish of a dispatch-sized message to a quorum
 * queue of its own, awaiting the broker's confirm. Samples are `gapMs` apart, so each starts from idle
 * connections as a due campaign does in the spread scenario.
 */
export async function baseline(options: {
  db: Database;
  amqpUrl: string;
  queue: string;
  queueType: 'quorum' | 'classic';
  samples: number;
  gapMs: number;
  body: string;
}): Promise<{ total: number[]; transaction: number[]; publish: number[] }> {
  const connection = await amqp.connect(options.amqpUrl);
  const channel = await connection.createConfirmChannel();
  await channel.assertQueue(options.queue, queueOptions(options.queueType));
  const total: number[] = [];
  const transaction: number[] = [];
  const publish: number[] = [];
  try {
    for (let i = 0; i < options.samples + 10; i++) {
      await new Promise((resolve) => setTimeout(resolve, options.gapMs));
      const started = performance.now();
      await options.db.transaction((tx) => tx.query('select now()'));
      const committed = performance.now();
      await new Promise<void>((resolve, reject) => {
        channel.publish(
          '',
          options.queue,
          Buffer.from(options.body, 'utf8'),
          {
            persistent: true,
            mandatory: true,
            messageId: randomUUID(),
            contentType: 'application/json',
            priority: 8,
            timestamp: Math.floor(Date.now() / 1000),
            appId: 'herald',
          },
          (error: unknown) => (error ? reject(new Error('nacked')) : resolve()),
        );
      });
      const confirmed = performance.now();
      if (i < 10) continue; // warm-up: connections, JIT, the queue's first writes
      total.push(confirmed - started);
      transaction.push(committed - started);
      publish.push(confirmed - committed);
    }
  } finally {
    await channel.deleteQueue(options.queue).catch(() => {});
    await connection.close().catch(() => {});
  }
  return { total, transaction, publish };
}
