/**
 * The campaign slice's part of `npm run demo` (seed 000, then seed 003): a handful of LINE campaigns
 * (broadcast and multicast due in a few seconds, one sent now, one cancelled, one paused then resumed,
 * one scheduled through the API with an Idempotency-Key, one edited) delivered through the LINE test
 * server (a channel and sealed audiences registered through the API), watched until each reaches its
 * expected status, with each LINE call's request id, the server's counts and one campaign's event
 * history; then the SMS campaigns
 * (sms/demo.ts). Returns whether every campaign reached its expected final state.
 */
import { randomBytes } from 'node:crypto';
import type { DemoApi, DemoContext, DemoStep } from '../../registry/demo.js';
import { type LineSimulator, startLineSimulator } from './line/simulator/server.js';
import { CampaignService } from './service.js';
import type { CampaignConfig } from './settings.js';
import { type BillingSimulator, startBillingSimulator } from './sms/billing-simulator.js';
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
    // The LINE section sends four broadcasts to one official account within a minute: at LINE's 60 an
    // hour (the default) the demo would wait minutes for slots and time out, so the test server's channel
    // is given a demo rate.
    HERALD_LINE_BROADCAST_PER_HOUR: '3600',
  },
  // The LINE test server (it validates every request against LINE's OpenAPI document) and the billing
  // test server SMS campaigns are charged through (HERALD_BILLING=http with a bearer token; ADR 0023),
  // before the roles. `HERALD_BILLING=ledger npm run demo` charges the PostgreSQL ledger instead.
  async setUp() {
    demoSimulator = await startLineSimulator({ host: '127.0.0.1', port: 0 });
    const simulator = demoSimulator;
    const token = randomBytes(24).toString('base64url');
    const billing =
      process.env.HERALD_BILLING === 'ledger'
        ? undefined
        : await startBillingSimulator({ host: '127.0.0.1', port: 0, tokens: [token] });
    demoBilling = billing;
    return {
      env: {
        HERALD_LINE_API_BASE_URL: simulator.url,
        ...(billing
          ? { HERALD_BILLING: 'http', HERALD_BILLING_URL: billing.url, HERALD_BILLING_TOKEN: token }
          : {}),
      },
      async close() {
        await simulator.close();
        await billing?.close();
      },
    };
  },
  async run(context) {
    return (await runLineDemo(context)) && runSmsDemo(context, demoBilling);
  },
};

async function runLineDemo({ runtime, api, out }: DemoContext<CampaignConfig>): Promise<boolean> {
  const simulator = demoSimulator;
  if (!simulator) throw new Error('the LINE test server was not started (campaignDemo.setUp)');
  const campaigns = new CampaignService({ db: runtime.db, handler: runtime.handler });
  const { rows } = await runtime.db.query<{ now: Date }>('select now() as now');
  const now = rows[0]!.now.getTime();
  const at = (seconds: number) => new Date(now + seconds * 1000);
  const org = api.organizationId;

  // The official account's channel, registered through the API (the token is sealed, never echoed).
  const token = randomBytes(24).toString('base64url');
  simulator.addChannel({ channelId: DEMO_CHANNEL, tokens: [token], friends: DEMO_FRIENDS });
  const channel = await apiCall(api, 'POST', '/v1/line/channels', {
    lineOaId: DEMO_OA,
    channelId: DEMO_CHANNEL,
    channelAccessToken: token,
  });
  out(`LINE: channel ${DEMO_CHANNEL} registered for ${DEMO_OA} (${JSON.stringify(channel)})`);
  // Sealed audiences: a multicast goes to LINE in chunks of at most 500 user ids.
  for (const [index, size] of DEMO_AUDIENCES.entries()) {
    const audienceId = `audience-${index + 1}`;
    await apiCall(api, 'POST', '/v1/line/audiences', { audienceId, name: `demo audience ${index + 1}` });
    const userIds = Array.from({ length: size }, (_, i) => demoUserId(index * 10_000 + i));
    await apiCall(api, 'POST', `/v1/line/audiences/${audienceId}/members`, { userIds });
    await apiCall(api, 'POST', `/v1/line/audiences/${audienceId}/seal`);
  }
  out(`LINE: audiences sealed: ${DEMO_AUDIENCES.map((n, i) => `audience-${i + 1} (${n} users)`).join(', ')}`);

  const made: { label: string; id: string; expected: string }[] = [];
  let audiences = 0;
  const create = async (label: string, castType: 'broadcast' | 'multicast', expected: string) => {
    const c = await campaigns.create(
      {
        mode: 'draft',
        organizationId: org,
        channel: 'line',
        castType,
        audienceId: castType === 'multicast' ? `audience-${(audiences++ % DEMO_AUDIENCES.length) + 1}` : null,
        lineOaId: DEMO_OA,
        name: label,
        line: { messages: [{ type: 'text', text: `${label}: hello from Herald` }] },
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
  // The CMS edit (seed 000): new content before the campaign is claimed.
  await campaigns.edit(m2, {
    name: 'cart reminder multicast',
    messages: [
      { type: 'text', text: 'Your cart misses you' },
      { type: 'sticker', packageId: '446', stickerId: '1988' },
    ],
  });
  await campaigns.schedule(m2, at(5));
  const now1 = await create('flash alert (send now)', 'broadcast', 'COMPLETED');
  await campaigns.sendNow(now1); // DRAFT → DISPATCHING in one transaction, no scanner involved
  const cancelled = await create('retracted promo (cancelled)', 'multicast', 'CANCELLED');
  await campaigns.schedule(cancelled, at(4));
  await campaigns.cancel(cancelled, 'wrong audience');
  const paused = await create('paused then resumed', 'multicast', 'COMPLETED');
  await campaigns.schedule(paused, at(6));
  await campaigns.pause(paused);
  out(`created ${made.length} campaigns; edited "cart reminder multicast"; paused "${made.at(-1)!.label}"`);
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
  out('final statuses, with the LINE calls (x-line-request-id) each delivery made:');
  for (const m of made) {
    const s = await campaigns.get(m.id);
    const p = s.line?.progress;
    const progress = p
      ? `chunks ${p.chunksAccepted}/${s.line?.plan?.chunks ?? 0} recipients ${s.castType === 'broadcast' ? 'all friends' : p.recipientsAccepted}`
      : '';
    out(`  ${m.label.padEnd(30)} ${s.status.padEnd(10)} ${progress}`);
    for (const e of await campaigns.history(m.id)) {
      if (e.type !== 'LineChunkAccepted') continue;
      const d = e.data as {
        chunk: number;
        requestId: string | null;
        acceptedRequestId: string | null;
        retryKey: string;
      };
      out(
        `      chunk ${d.chunk}: x-line-request-id ${d.requestId ?? d.acceptedRequestId} (X-Line-Retry-Key ${d.retryKey})`,
      );
    }
  }
  const stats = simulator.stats(DEMO_CHANNEL);
  out();
  out(
    `LINE test server: ${stats.requestCount} requests, ${stats.accepted} accepted, ${stats.duplicates} answered 409, ` +
      `${stats.recipientsDelivered} receipts (${stats.distinctRecipients} distinct users, ${stats.usersReceivedMoreThanOnce} more than once ` +
      `across campaigns), ${simulator.violationCount} OpenAPI violations`,
  );
  if (simulator.violationCount > 0) {
    out(
      `demo: Herald sent requests LINE's OpenAPI document refuses: ${JSON.stringify(simulator.violations())}`,
    );
    return false;
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

const DEMO_OA = 'oa-demo';
const DEMO_CHANNEL = 'demo-channel';
/** Members of the demo's sealed audiences (the first takes 3 multicast chunks). */
const DEMO_AUDIENCES = [1_200, 300, 100, 50];
const demoUserId = (i: number) => `U${i.toString(16).padStart(32, '0')}`;
const DEMO_FRIENDS = Array.from({ length: 25 }, (_, i) => demoUserId(900_000 + i));
let demoSimulator: LineSimulator | undefined;
let demoBilling: BillingSimulator | undefined;

async function apiCall(api: DemoApi, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${api.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${api.key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = await response.json();
  if (!response.ok)
    throw new Error(`${method} ${path} answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer;
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
        lineOaId: DEMO_OA,
        line: { messages: [{ type: 'text', text: 'Created through the API, sent once' }] },
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
