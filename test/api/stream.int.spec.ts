/**
 * GET /v1/stream over real HTTP, fed by real LISTEN/NOTIFY: a command through the API reaches a
 * connected client as an event of its topic within a deadline; a burst of notifications is coalesced to
 * at most one event per topic per second (leading + trailing); the cookie session authenticates it;
 * many clients connecting and disconnecting leave no client, timer, LISTEN handler or connection
 * behind; each organization hears only of its own changes (campaigns, cron jobs, outbox rows a real
 * relay sent); and streams are bounded per organization and per key (429 naming the limit) and per
 * process (503 naming it). What a client receives conforms to the document's `text/event-stream` schema.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoalescingNotifier, PgWakeupListener } from '../../src/adapters/postgres/notifications.js';
import { channels, organizationPayloads, organizationsOf } from '../../src/ports/wakeups.js';
import { waitFor } from '../../src/testing/wait.js';
import { BrokerFixture, outboxCounts, seedOutbox } from '../outbox/support/fixtures.js';
import { RelayHarness } from '../outbox/support/relay-harness.js';
import {
  type ApiFixture,
  expectProblem,
  httpRequestCount,
  lineCampaignBody,
  startTestApi,
} from './support/api.js';
import { checkConformance } from './support/conformance.js';

let api: ApiFixture;
let key: string;

beforeAll(async () => {
  // Sixty tabs of one key below (the per-key default is 20; the limits have their own test).
  api = await startTestApi({ HERALD_API_STREAMS_PER_KEY: '100' });
  key = await api.key('org-live', 'operator');
}, 60_000);
afterAll(async () => api?.close());

interface Frame {
  event: string;
  data: string;
  at: number;
}

/** A connected SSE client: its frames as they arrive, and a way to hang up. */
async function connect(
  path = '/v1/stream',
  headers: Record<string, string> = { authorization: `Bearer ${key}` },
  url = api.url,
) {
  const abort = new AbortController();
  const response = await fetch(`${url}${path}`, { headers, signal: abort.signal });
  const frames: Frame[] = [];
  const comments: string[] = [];
  // Whole frames as received, checked against the document's text/event-stream schema on close.
  let received = '';
  const conform = (text: string) =>
    checkConformance(url, {
      method: 'GET',
      path,
      status: response.status,
      contentType: response.headers.get('content-type'),
      text,
    });
  let done: Promise<void> = Promise.resolve();
  // A refusal's body, read once: checked here, parsed by the test through `problem`.
  let refusal: unknown;
  if (!response.ok) {
    const text = await response.text();
    await conform(text);
    refusal = JSON.parse(text);
  } else if (response.body) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    done = (async () => {
      let buffer = '';
      try {
        for (;;) {
          const { value, done: ended } = await reader.read();
          if (ended) return;
          buffer += value;
          let cut = buffer.indexOf('\n\n');
          while (cut >= 0) {
            const block = buffer.slice(0, cut);
            received += buffer.slice(0, cut + 2);
            buffer = buffer.slice(cut + 2);
            const lines = block.split('\n');
            const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
            const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
            if (event) frames.push({ event, data: data ?? '', at: Date.now() });
            else comments.push(block);
            cut = buffer.indexOf('\n\n');
          }
        }
      } catch {
        // aborted
      }
    })();
  }
  return {
    response,
    refusal,
    frames,
    comments,
    of: (topic: string) => frames.filter((f) => f.event === topic),
    close: async () => {
      abort.abort();
      await done;
      if (response.ok) await conform(received);
    },
  };
}

describe('GET /v1/stream', () => {
  it('is an event stream, and a command produces an event of its topic within a deadline', async () => {
    const client = await connect();
    expect(client.response.status).toBe(200);
    expect(client.response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await api.server.app.heraldStream.ready();
    await waitFor(() => client.comments.some((c) => c.includes(': connected')), {
      what: 'the first comment',
    });
    const created = await api.request('POST', '/v1/campaigns', { key, body: lineCampaignBody() });
    expect(created.status).toBe(201);
    const event = await waitFor(() => client.of('campaigns')[0], {
      timeoutMs: 5_000,
      what: 'a campaigns event',
    });
    expect(JSON.parse(event.data).at).toMatch(/^\d{4}-\d\d-\d\dT/);
    await waitFor(() => client.of('overview')[0], { timeoutMs: 5_000, what: 'an overview event' });
    await client.close();
  });

  it('coalesces a burst to at most one event per topic per second, and the last one follows the burst', async () => {
    const hub = api.server.app.heraldStream;
    const client = await connect('/v1/stream?topics=actions');
    await hub.ready();
    await waitFor(() => client.comments.length > 0, { what: 'connected' });
    const channel = channels.changed(api.t.schema, 'scheduled_action');
    const started = Date.now();
    const payload = JSON.stringify(['org-live']);
    for (let i = 0; i < 30; i++) await api.t.db.query('select pg_notify($1, $2)', [channel, payload]);
    const ended = Date.now();
    await waitFor(() => client.of('actions').length >= 1, { timeoutMs: 5_000, what: 'an actions event' });
    // The trailing event of the window has gone out once no timer is armed any more.
    await waitFor(() => hub.stats().trailingTimers === 0, { timeoutMs: 5_000, what: 'the window to close' });
    await waitFor(() => client.of('actions').at(-1)!.at >= ended, {
      timeoutMs: 2_000,
      what: 'the trailing event',
    });
    const times = client.of('actions').map((f) => f.at);
    // 30 notifications in ${ended - started} ms: one event per second at most (leading + trailing,
    // plus one if a reconnect wake-up opened a window just before the burst).
    expect(times.length).toBeLessThanOrEqual(2 + Math.ceil((ended - started) / 1_000));
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(900);
    // A client subscribed to `actions` only receives no other topic.
    expect(client.frames.every((f) => f.event === 'actions')).toBe(true);
    await client.close();
  });

  it('authenticates like every route: no credentials 401, an unknown topic 400 naming the field, a session cookie works', async () => {
    const anonymous = await fetch(`${api.url}/v1/stream`);
    expect(anonymous.status).toBe(401);
    await checkConformance(api.url, {
      method: 'GET',
      path: '/v1/stream',
      status: anonymous.status,
      contentType: anonymous.headers.get('content-type'),
      text: await anonymous.text(),
    });
    const bad = await api.request('GET', '/v1/stream?topics=campaigns,nope', { key });
    expectProblem(bad, 422, 'topics');
    const signIn = await api.request('POST', '/v1/session', { body: { apiKey: key } });
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0]!;
    const client = await connect('/v1/stream', { cookie });
    expect(client.response.status).toBe(200);
    await client.close();
  });

  it('many clients connecting and disconnecting leave no client, timer, handler or connection behind', async () => {
    const hub = api.server.app.heraldStream;
    await hub.ready();
    const listener = api.runtime.listener as unknown as { handlers: Map<string, Set<unknown>> };
    const handlersBefore = [...listener.handlers.values()].reduce((n, set) => n + set.size, 0);
    const listens = async () =>
      (
        await api.t.db.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where application_name = 'herald-listen' and datname = current_database()",
        )
      ).rows[0]!.n;
    const listenBefore = await listens();
    expect(listenBefore).toBe(1);

    const clients = await Promise.all(Array.from({ length: 60 }, () => connect()));
    await waitFor(() => hub.stats().clients === 60, { what: '60 clients' });
    expect(hub.stats().heartbeat).toBe(true);
    // Events reach all of them.
    await api.t.db.query('select pg_notify($1, $2)', [
      channels.changed(api.t.schema, 'cron_job'),
      JSON.stringify(['org-live']),
    ]);
    await waitFor(() => clients.every((c) => c.of('cron').length > 0), { timeoutMs: 5_000, what: 'fan-out' });
    await Promise.all(clients.map((c) => c.close()));

    await waitFor(() => hub.stats().clients === 0, { what: 'every client detached' });
    expect(hub.stats()).toEqual({ clients: 0, trailingTimers: 0, heartbeat: false });
    const handlersAfter = [...listener.handlers.values()].reduce((n, set) => n + set.size, 0);
    expect(handlersAfter).toBe(handlersBefore);
    expect(await listens()).toBe(listenBefore);
    // The server's sockets are freed too (nothing keeps the closed streams open).
    await waitFor(
      async () =>
        (await new Promise<number>((resolve, reject) =>
          api.server.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
        )) <= 1,
      { what: 'the streams’ sockets closed' },
    );
  });

  it("a stream is counted in /metrics when it closes (a hijacked reply skips Fastify's onResponse)", async () => {
    const count = () => httpRequestCount(api, 'GET', '/v1/stream', 200);
    const before = await count();
    const client = await connect();
    await waitFor(() => client.comments.length > 0, { what: 'connected' });
    expect(await count()).toBe(before);
    await client.close();
    await waitFor(async () => (await count()) === before + 1, { what: 'the closed stream counted' });
  });

  it('closing the server ends open streams at once', async () => {
    const own = await startTestApi();
    const ownKey = await own.key('org-close', 'viewer');
    const abort = new AbortController();
    const response = await fetch(`${own.url}/v1/stream`, {
      headers: { authorization: `Bearer ${ownKey}` },
      signal: abort.signal,
    });
    expect(response.status).toBe(200);
    const body = response.text();
    const started = Date.now();
    await own.close();
    await body; // the stream ended (not aborted)
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('tells each organization only of its own changes: campaigns, cron jobs, and outbox rows a relay sent', async () => {
    const hub = api.server.app.heraldStream;
    await hub.ready();
    const otherKey = await api.key('org-quiet', 'operator');
    const a = await connect();
    const b = await connect('/v1/stream', { authorization: `Bearer ${otherKey}` });
    await waitFor(() => a.comments.length > 0 && b.comments.length > 0, { what: 'both connected' });
    const created = await api.request('POST', '/v1/campaigns', { key, body: lineCampaignBody() });
    expect(created.status, created.text).toBe(201);
    const job = await api.request('POST', '/v1/cron-jobs', { key, body: pingJob() });
    expect(job.status, job.text).toBe(201);
    // Outbox rows of organization A, published by a real relay that tells the dashboards (the role's wiring).
    const broker = await BrokerFixture.open();
    const relays = new RelayHarness(api.t);
    const changes = new CoalescingNotifier(api.t.db, 50);
    try {
      const queue = await broker.queue('stream');
      await seedOutbox(api.t.db, { count: 3, destination: queue, organizationId: 'org-live' });
      await relays.make({}, { changes }).relay.start();
      for (const topic of ['campaigns', 'cron', 'outbox', 'overview']) {
        await waitFor(() => a.of(topic)[0], { timeoutMs: 5_000, what: `A's ${topic} event` });
      }
      expect((await outboxCounts(api.t.db)).sent).toBeGreaterThanOrEqual(3);
    } finally {
      await relays.close();
      changes.close();
      await broker.close();
    }
    // B's own change reaches B: had any of A's changes reached it, it would have arrived first (one socket,
    // in order; the hub wrote A's events to every recipient before B's change was even made).
    const own = await api.request('POST', '/v1/cron-jobs', { key: otherKey, body: pingJob() });
    expect(own.status, own.text).toBe(201);
    await waitFor(() => b.of('cron')[0], { timeoutMs: 5_000, what: "B's own cron event" });
    await waitFor(() => b.of('overview')[0], { timeoutMs: 5_000, what: "B's own overview event" });
    expect(b.frames.map((f) => f.event).sort()).toEqual(['cron', 'overview']);
    expect(b.of('campaigns')).toEqual([]);
    expect(b.of('outbox')).toEqual([]);
    await Promise.all([a.close(), b.close()]);
  });

  it("a notifier's NOTIFY names the organizations signalled in its window, and a listener hands over each payload", async () => {
    const channel = channels.changed(api.t.schema, 'stream_scope_probe');
    const listener = new PgWakeupListener({ url: api.t.url, schema: api.t.schema });
    const payloads: (string | undefined)[] = [];
    await listener.subscribe(channel, (payload) => payloads.push(payload));
    const notifier = new CoalescingNotifier(api.t.db, 50);
    try {
      // The subscription's own wake-up (after connecting) carries no payload.
      await waitFor(() => payloads.includes(undefined), { what: 'the wake-up after connecting' });
      notifier.signal(channel, 'org-1');
      notifier.signal(channel, 'org-2');
      notifier.signal(channel, 'org-3');
      notifier.signal(channel, 'org-2');
      notifier.signal(channel, null);
      const named = () => payloads.flatMap((p) => (p === undefined ? [] : organizationsOf(p)));
      await waitFor(() => new Set(named()).size === 3, {
        timeoutMs: 5_000,
        what: 'every organization named',
      });
      // Leading edge: the first alone; the rest of the window in one trailing NOTIFY.
      expect(payloads.filter((p) => p !== undefined)).toEqual([
        JSON.stringify(['org-1']),
        JSON.stringify(['org-2', 'org-3']),
      ]);
    } finally {
      notifier.close();
      await listener.close();
    }
    // Many long organization ids are split over NOTIFYs PostgreSQL accepts (each under 8000 bytes).
    const many = Array.from({ length: 200 }, (_, i) => `${'o'.repeat(190)}-${i}`);
    const split = organizationPayloads(many);
    expect(split.length).toBeGreaterThan(1);
    expect(split.flatMap(organizationsOf)).toEqual(many);
    for (const payload of split) await api.t.db.query('select pg_notify($1, $2)', [channel, payload]);
  });
});

describe('stream limits', () => {
  it('an organization at its cap gets 429 naming the limit, while another organization (and a key under its own cap) still connects; the process cap is a 503 naming its limit', async () => {
    const own = await startTestApi({
      HERALD_API_STREAMS_PER_ORGANIZATION: '3',
      HERALD_API_STREAMS_PER_KEY: '2',
      HERALD_API_STREAMS_MAX: '5',
    });
    const open: Awaited<ReturnType<typeof connect>>[] = [];
    try {
      const auth = (k: string) => ({ authorization: `Bearer ${k}` });
      const a1 = await own.key('org-busy', 'viewer');
      const a2 = await own.key('org-busy', 'viewer');
      const b1 = await own.key('org-calm', 'viewer');
      const c1 = await own.key('org-third', 'viewer');
      const attempt = async (k: string) => {
        const client = await connect('/v1/stream', auth(k), own.url);
        if (client.response.ok) open.push(client);
        return client;
      };
      const problemOf = async (client: Awaited<ReturnType<typeof connect>>) => ({
        status: client.response.status,
        type: client.response.headers.get('content-type'),
        retryAfter: client.response.headers.get('retry-after'),
        body: client.refusal as { limit?: string; detail?: string; code?: string },
      });
      expect((await attempt(a1)).response.status).toBe(200);
      expect((await attempt(a1)).response.status).toBe(200);
      // The key's cap: a third stream of key a1 is refused, naming the setting.
      const perKey = await problemOf(await attempt(a1));
      expect(perKey).toMatchObject({
        status: 429,
        type: expect.stringMatching(/^application\/problem\+json/),
        retryAfter: '2',
        body: { code: 'LIMIT_REACHED', limit: 'HERALD_API_STREAMS_PER_KEY' },
      });
      // Another key of the organization still connects, up to the organization's cap.
      expect((await attempt(a2)).response.status).toBe(200);
      const perOrganization = await problemOf(await attempt(a2));
      expect(perOrganization).toMatchObject({
        status: 429,
        retryAfter: '2',
        body: { code: 'LIMIT_REACHED', limit: 'HERALD_API_STREAMS_PER_ORGANIZATION' },
      });
      expect(perOrganization.body.detail).toMatch(/3 live streams/);
      // Another organization is not affected.
      expect((await attempt(b1)).response.status).toBe(200);
      expect((await attempt(b1)).response.status).toBe(200);
      // The process is full (5): a third organization gets the process's limit, not "dependency unavailable".
      const full = await problemOf(await attempt(c1));
      expect(full).toMatchObject({
        status: 503,
        retryAfter: '2',
        body: { code: 'OVERLOADED', limit: 'HERALD_API_STREAMS_MAX' },
      });
      expect(full.body.detail).not.toMatch(/dependency/);
      // A closed stream frees its slots at once.
      await open.shift()!.close();
      await waitFor(() => own.server.app.heraldStream.stats().clients === 4, { what: 'a slot freed' });
      expect((await attempt(c1)).response.status).toBe(200);
      expect((await attempt(a2)).response.status).toBe(503);
    } finally {
      await Promise.all(open.map((c) => c.close()));
      await own.close();
    }
  });
});

const pingJob = () => ({
  name: `job ${crypto.randomUUID().slice(0, 8)}`,
  schedule: '0 * * * *',
  timezone: 'Europe/Berlin',
  jobType: 'ping',
  payload: { url: 'https://example.com/health' },
});
