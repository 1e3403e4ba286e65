/**
 * The campaign slice's part of `npm run demo` (seed 000, then seed 003): a handful of LINE campaigns
 * (broadcast and multicast due in a few seconds, one sent now, one cancelled, one paused then resumed,
 * one scheduled through the API with an Idempotency-Key) watched until each reaches its expected
 * status, with the deliveries and one campaign's event history; then the SMS campaigns
 * (sms/demo.ts). Returns whether every campaign reached its expected final state.
 */
import { countLineDeliveries } from '../../adapters/postgres/line-delivery-queries.js';
import type { DemoApi, DemoContext, DemoStep } from '../../registry/demo.js';
import { CampaignService } from './service.js';
import type { CampaignConfig } from './settings.js';
import { runSmsDemo } from './sms/demo.js';

export const campaignDemo: DemoStep<CampaignConfig> = {
  env: {
    // The SMS section: the relay creates the submit topic; the promotional (BTRC) window is opened all
    // day so the demo dispatches whatever the time in Dhaka (default 09:00-21:00).
    HERALD_KAFKA_CREATE_TOPICS: 'true',
    HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59',
    // Retries after about a second instead of five minutes, so the demo shows a number exhausting its
    // attempts while it runs.
    HERALD_SMS_RETRY_MINUTES: '0',
    HERALD_SMS_RETRY_JITTER_SECONDS: '1',
  },
  async run(context) {
    return (await runLineDemo(context)) && runSmsDemo(context);
  },
};

async function runLineDemo({ runtime, api, out }: DemoContext<CampaignConfig>): Promise<boolean> {
  const campaigns = new CampaignService({ db: runtime.db, handler: runtime.handler });
  const { rows } = await runtime.db.query<{ now: Date }>('select now() as now');
  const now = rows[0]!.now.getTime();
  const at = (seconds: number) => new Date(now + seconds * 1000);
  const org = api.organizationId;
  const made: { label: string; id: string; expected: string }[] = [];
  const create = async (label: string, castType: 'broadcast' | 'multicast', expected: string) => {
    const c = await campaigns.create(
      {
        mode: 'draft',
        organizationId: org,
        channel: 'line',
        castType,
        audienceId: castType === 'multicast' ? `audience-${made.length + 1}` : null,
        lineOaId: 'oa-demo',
        name: label,
      },
      { actor: 'demo', correlationId: `demo-${made.length + 1}` },
    );
    made.push({ label, id: c.campaignId, expected });
    return c.campaignId;
  };

  const b1 = await create('spring sale broadcast', 'broadcast', 'COMPLETED');
  await campaigns.schedule(b1, at(3));
  const b2 = await create('weekly digest broadcast', 'broadcast', 'COMPLETED');
  await campaigns.schedule(b2, at(4), at(60));
  const m1 = await create('vip multicast', 'multicast', 'COMPLETED');
  await campaigns.schedule(m1, at(3.5));
  const m2 = await create('cart reminder multicast', 'multicast', 'COMPLETED');
  await campaigns.schedule(m2, at(5));
  const now1 = await create('flash alert (send now)', 'broadcast', 'COMPLETED');
  await campaigns.sendNow(now1); // DRAFT → DISPATCHING in one transaction, no scanner involved
  const cancelled = await create('retracted promo (cancelled)', 'multicast', 'CANCELLED');
  await campaigns.schedule(cancelled, at(4));
  await campaigns.cancel(cancelled, 'wrong audience');
  const paused = await create('paused then resumed', 'multicast', 'COMPLETED');
  await campaigns.schedule(paused, at(6));
  await campaigns.pause(paused);
  out(`created ${made.length} campaigns; paused "${made.at(-1)!.label}"`);
  await campaigns.resume(paused);
  out(`resumed "${made.at(-1)!.label}"`);
  made.push({
    label: 'api campaign (Idempotency-Key)',
    id: await scheduleThroughApi(api, at(4.5), out),
    expected: 'COMPLETED',
  });
  out('waiting for dispatch…');
  out();

  const deadline = Date.now() + 60_000;
  let last = '';
  for (;;) {
    const states = await Promise.all(made.map((m) => campaigns.get(m.id)));
    const line = states.map((s, i) => `${made[i]!.label.split(' ')[0]}=${s.status}`).join('  ');
    if (line !== last) {
      out(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
      last = line;
    }
    if (states.every((s, i) => s.status === made[i]!.expected)) break;
    if (Date.now() > deadline) {
      out('demo: timed out waiting for the campaigns to finish');
      return false;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  out();
  out('final statuses (deliveries recorded by the LINE delivery port):');
  const deliveries = await countLineDeliveries(
    runtime.db,
    made.map((m) => m.id),
  );
  for (const m of made) {
    const s = await campaigns.get(m.id);
    const lag =
      s.startAt && s.status === 'COMPLETED'
        ? ` (start ${s.startAt.slice(11, 23)}, claimed epoch ${s.claimEpoch})`
        : '';
    out(`  ${m.label.padEnd(30)} ${s.status.padEnd(10)} deliveries=${deliveries.get(m.id) ?? 0}${lag}`);
  }
  out();
  out(`event history of "${made[0]!.label}" (${b1}):`);
  for (const e of await campaigns.history(b1)) {
    const actor = e.meta.actor ? ` by ${e.meta.actor}` : '';
    out(
      `  v${e.version} ${e.recordedAt.toISOString().slice(11, 23)} ${e.type}${actor} ${JSON.stringify(e.data)}`,
    );
  }
  const { rows: outbox } = await runtime.db.query<{ status: string; n: number }>(
    'select status, count(*)::int as n from outbox group by status order by status',
  );
  out();
  out(`outbox: ${outbox.map((r) => `${r.status}=${r.n}`).join(' ')}`);
  return true;
}

/**
 * Creates and schedules a campaign through the API with an Idempotency-Key, then retries the same
 * request: one campaign, the retry answered from the key (`Idempotent-Replayed: true`).
 */
async function scheduleThroughApi(
  api: DemoApi,
  startAt: Date,
  out: (line?: string) => void,
): Promise<string> {
  const request = () =>
    fetch(`${api.url}/v1/campaigns`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${api.key}`,
        'content-type': 'application/json',
        'idempotency-key': 'demo-api-campaign-1',
      },
      body: JSON.stringify({
        channel: 'line',
        name: 'api campaign (Idempotency-Key)',
        castType: 'broadcast',
        lineOaId: 'oa-demo',
        startAt: startAt.toISOString(),
      }),
    });
  const first = await request();
  const created = (await first.json()) as { campaignId: string; status: string };
  if (first.status !== 201)
    throw new Error(`POST /v1/campaigns answered ${first.status}: ${JSON.stringify(created)}`);
  const retry = await request();
  const replayed = (await retry.json()) as { campaignId: string };
  out(
    `API: POST /v1/campaigns → ${first.status} ${created.status} ${created.campaignId}; ` +
      `the retry with the same Idempotency-Key → ${retry.status}, Idempotent-Replayed: ${retry.headers.get('idempotent-replayed')}, ` +
      `${replayed.campaignId === created.campaignId ? 'the same campaign' : 'ANOTHER campaign'}`,
  );
  if (replayed.campaignId !== created.campaignId) throw new Error('the retry made a second campaign');
  return created.campaignId;
}
