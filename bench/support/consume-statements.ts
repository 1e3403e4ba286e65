/**
 * --statement-cpu for the consumer benchmark: what each statement of the fenced LINE delivery's inbox
 * transaction costs PostgreSQL (and the pg driver), measured without concurrency. On one connection,
 * transactions BEGIN; the first k statements of the inbox transaction; COMMIT (k = 0…8), each on a fresh
 * claimed campaign whose delivery steps (its plan and its one chunk) are already recorded — they commit
 * in transactions of their own, on other connections, while the inbox transaction waits for LINE; each
 * is the command handler's load for update, append and update, measured here as the completion's —,
 * sent by the production query functions with the values the worker sends, round-robin over
 * k. The median backend CPU time per transaction (from /proc) for prefix k minus that for prefix
 * k − 1 is statement k's cost; prefix 0 (BEGIN; COMMIT) is the transaction's own. The same again with
 * every statement sent as a named prepared statement (parsed and planned once per connection), to
 * show how much of each cost is parse and plan; and the baseline's transaction for comparison.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { loadCampaign, saveCampaigns } from '../../src/adapters/postgres/campaign-queries.js';
import { connectionConfig } from '../../src/adapters/postgres/database.js';
import { appendEvents } from '../../src/adapters/postgres/event-queries.js';
import { claimInbox } from '../../src/adapters/postgres/inbox-queries.js';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import { LINE_DELIVERY_CONSUMER } from '../../src/aggregates/campaign/topology.js';
import type { LineDeliveryStep } from '../../src/domain/campaign/commands.js';
import {
  type CampaignCommand,
  type CampaignState,
  campaignDecider,
  type ExistingCampaign,
} from '../../src/domain/campaign.js';
import { CommandHandler, databaseNow } from '../../src/eventstore/command-handler.js';
import type { Database, SqlClient } from '../../src/ports/database.js';
import { lineUserId } from '../../test/support/line.js';
import type { TestDatabase } from '../../test/support/services.js';
import { BENCH_AUDIENCE_MEMBERS, createClaimedCampaigns } from './consume-setup.js';
import { processCpuMs, threadCpuMs } from './consume-workers.js';

interface Item {
  campaignId: string;
  messageId: string;
  castType: 'broadcast' | 'multicast';
  audienceId: string | null;
  lineOaId: string | null;
}

interface Context {
  now?: Date;
  loaded?: { state: ExistingCampaign; version: number };
}

/**
 * The inbox transaction's statements in order (fenced-handler.ts, line/delivery.ts, command-handler.ts),
 * as the worker sends them.
 */
const STEPS: { name: string; run: (tx: SqlClient, item: Item, context: Context) => Promise<unknown> }[] = [
  {
    name: 'inbox claim (insert … on conflict)',
    run: (tx, item) =>
      claimInbox(tx, { consumer: LINE_DELIVERY_CONSUMER, messageId: item.messageId, attempt: 1 }),
  },
  { name: 'load campaign (re-check)', run: (tx, item) => loadCampaign(tx, item.campaignId) },
  { name: 'savepoint', run: (tx) => tx.query('savepoint herald_fenced_effect') },
  // The delivery's start (its key-validity check); then the LINE call and the steps, on other connections.
  { name: 'select now() (delivery start)', run: (tx) => databaseNow(tx) },
  {
    name: 'select now()',
    run: async (tx, _item, context) => {
      context.now = await databaseNow(tx);
    },
  },
  {
    name: 'load campaign for update',
    run: async (tx, item, context) => {
      context.loaded = (await loadCampaign(tx, item.campaignId, { forUpdate: true }))!;
    },
  },
  {
    name: 'append event',
    run: (tx, item, context) =>
      appendEvents(tx, [
        {
          streamType: 'campaign',
          streamId: item.campaignId,
          version: context.loaded!.version + 1,
          type: 'CampaignCompleted',
          data: { epoch: 1, at: context.now!.toISOString() },
          meta: {
            correlationId: item.messageId,
            pod: 'bench',
            causationId: item.messageId,
            actor: 'line-delivery',
          },
        },
      ]),
  },
  {
    name: 'update campaign row',
    run: (tx, item, context) => {
      const [event] = campaignDecider.decide(
        { type: 'CompleteCampaign', campaignId: item.campaignId, epoch: 1, now: context.now! },
        context.loaded!.state,
      );
      const state = campaignDecider.evolve(context.loaded!.state, event!) as ExistingCampaign;
      const version = context.loaded!.version;
      return saveCampaigns(tx, [{ state, version: version + 1, expectedVersion: version }]);
    },
  },
];

/**
 * Every claimed campaign's delivery as the worker records it before the completion: the plan and its
 * one chunk accepted (a multicast to its organization's audience), 500 campaigns per transaction.
 */
async function recordDeliverySteps(db: Database): Promise<void> {
  const campaigns = new CommandHandler({ db, pod: 'bench-setup' }).for(campaignAggregate);
  const meta = { actor: 'bench-setup' };
  const { rows } = await db.query<{ id: string }>(
    `select id::text as id from campaign where status = 'DISPATCHING' order by id`,
  );
  const multicast = (state: CampaignState) => (state as ExistingCampaign).castType === 'multicast';
  const steps: ((state: CampaignState) => LineDeliveryStep)[] = [
    (state) => ({ type: 'plan', chunks: 1, recipients: multicast(state) ? BENCH_AUDIENCE_MEMBERS : null }),
    (state) => ({
      type: 'accepted',
      chunk: 0,
      recipients: multicast(state) ? BENCH_AUDIENCE_MEMBERS : null,
      cursor: multicast(state) ? lineUserId(BENCH_AUDIENCE_MEMBERS - 1) : null,
      requestId: `bench-${(state as ExistingCampaign).campaignId}`,
      acceptedRequestId: null,
    }),
  ];
  for (let start = 0; start < rows.length; start += 500) {
    const ids = rows.slice(start, start + 500).map((r) => r.id);
    await db.transaction(async (tx) => {
      const loaded = await campaignAggregate.store.loadMany!(tx, ids, { forUpdate: true });
      let streams = ids.map((id) => ({ streamId: id, ...loaded.get(id)! }));
      for (const step of steps) {
        const done = await campaigns.handleBatchInTransaction(
          tx,
          streams,
          (stream, now): CampaignCommand => ({
            type: 'AdvanceLineDelivery',
            campaignId: stream.streamId,
            epoch: 1,
            now,
            step: step(stream.state),
          }),
          { meta },
        );
        if (done.refused.length > 0) throw done.refused[0]!.error;
        streams = done.results.map((r) => ({ streamId: r.streamId, state: r.state, version: r.version }));
      }
    });
  }
}

export interface StatementCost {
  name: string;
  /** PostgreSQL backend CPU per execution (µs), unnamed statements (as Herald sends them). */
  postgresUs: number;
  /** The same with named prepared statements. */
  preparedUs: number;
  /** This process's CPU per execution (µs): the pg driver and the query functions. */
  clientUs: number;
}

function sqlClient(client: pg.Client, prepared: boolean): SqlClient {
  return {
    async query<Row>(text: string, values?: readonly unknown[]) {
      const config = prepared
        ? {
            name: `s${createHash('sha1').update(text).digest('hex').slice(0, 16)}`,
            text,
            values: values as unknown[],
          }
        : { text, values: values as unknown[] };
      const result = await client.query(config);
      return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
    },
  };
}

async function backendPid(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  return rows[0]!.pid;
}

/** Rounds run before measuring (JIT, caches; the prepared variant's one Parse per statement). */
const WARM_UP = 100;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

/**
 * Per-transaction CPU (µs, medians) of BEGIN; steps[0..k); COMMIT for every k, measured round-robin
 * (one transaction of each prefix per round, each on a fresh campaign) so that every prefix sees the
 * same machine: whatever else runs on it shifts all of them alike, and the medians drop the
 * transactions someone else's burst landed on. The backend's run time and this thread's come from
 * /proc/<pid>/schedstat (ns).
 */
async function prefixCosts(
  client: pg.Client,
  pid: number,
  prepared: boolean,
  rounds: number,
  items: readonly Item[],
): Promise<{ postgresUs: number; clientUs: number }[]> {
  const tx = sqlClient(client, prepared);
  const samples = Array.from({ length: STEPS.length + 1 }, () => ({
    postgres: [] as number[],
    client: [] as number[],
  }));
  let next = 0;
  for (let round = 0; round < rounds + WARM_UP; round++) {
    for (let k = 0; k <= STEPS.length; k++) {
      const item = items[next++]!;
      const context: Context = {};
      const postgresBefore = processCpuMs(pid);
      const clientBefore = threadCpuMs(process.pid);
      await client.query('begin');
      for (const step of STEPS.slice(0, k)) await step.run(tx, item, context);
      await client.query('commit');
      const clientAfter = threadCpuMs(process.pid);
      const postgresAfter = processCpuMs(pid);
      if (round < WARM_UP) continue;
      samples[k]!.postgres.push((postgresAfter - postgresBefore) * 1000);
      samples[k]!.client.push((clientAfter - clientBefore) * 1000);
    }
  }
  return samples.map((s) => ({ postgresUs: median(s.postgres), clientUs: median(s.client) }));
}

export async function statementCosts(
  database: TestDatabase,
  perStep: number,
): Promise<{ steps: StatementCost[]; transaction: StatementCost; baseline: StatementCost }> {
  const variants = 2;
  const needed = (STEPS.length + 1) * variants * (perStep + WARM_UP);
  await createClaimedCampaigns(database.db, needed);
  await recordDeliverySteps(database.db);
  const { rows } = await database.db.query<{
    campaign_id: string;
    message_id: string;
    cast_type: 'broadcast' | 'multicast';
    audience_id: string | null;
    line_oa_id: string | null;
  }>(
    `select c.id::text as campaign_id, o.message_id::text as message_id, c.cast_type, c.audience_id, c.line_oa_id
       from outbox o join campaign c on c.id = (o.payload ->> 'campaignId')::uuid order by o.id`,
  );
  const items: Item[] = rows.map((r) => ({
    campaignId: r.campaign_id,
    messageId: r.message_id,
    castType: r.cast_type,
    audienceId: r.audience_id,
    lineOaId: r.line_oa_id,
  }));
  await database.db.query('vacuum (analyze) campaign');
  const client = new pg.Client(connectionConfig({ url: database.url, schema: database.schema }));
  await client.connect();
  try {
    const pid = await backendPid(client);
    const half = items.length / 2;
    const costs = {
      unnamed: await prefixCosts(client, pid, false, perStep, items.slice(0, half)),
      prepared: await prefixCosts(client, pid, true, perStep, items.slice(half)),
    };
    const step = (k: number): StatementCost => ({
      name: STEPS[k]!.name,
      postgresUs: costs.unnamed[k + 1]!.postgresUs - costs.unnamed[k]!.postgresUs,
      preparedUs: costs.prepared[k + 1]!.postgresUs - costs.prepared[k]!.postgresUs,
      clientUs: costs.unnamed[k + 1]!.clientUs - costs.unnamed[k]!.clientUs,
    });
    // The baseline's transaction, on fresh message ids.
    const insert = `
      insert into inbox (consumer, message_id, status, attempts) values ($1, $2, 'processed', 1)
      on conflict do nothing`;
    const baselineRun = async (id: string) => {
      await client.query('begin');
      await client.query(insert, ['bench-baseline', id]);
      await client.query('commit');
    };
    const baselinePostgres: number[] = [];
    const baselineClient: number[] = [];
    for (let i = 0; i < perStep + WARM_UP; i++) {
      const postgresBefore = processCpuMs(pid);
      const clientBefore = threadCpuMs(process.pid);
      await baselineRun(`baseline-${i}`);
      const clientAfter = threadCpuMs(process.pid);
      const postgresAfter = processCpuMs(pid);
      if (i < WARM_UP) continue;
      baselinePostgres.push((postgresAfter - postgresBefore) * 1000);
      baselineClient.push((clientAfter - clientBefore) * 1000);
    }
    return {
      steps: STEPS.map((_, k) => step(k)),
      transaction: {
        name: 'BEGIN + COMMIT',
        postgresUs: costs.unnamed[0]!.postgresUs,
        preparedUs: costs.prepared[0]!.postgresUs,
        clientUs: costs.unnamed[0]!.clientUs,
      },
      baseline: {
        name: 'baseline: BEGIN; inbox insert; COMMIT',
        postgresUs: median(baselinePostgres),
        preparedUs: Number.NaN,
        clientUs: median(baselineClient),
      },
    };
  } finally {
    await client.end();
  }
}
