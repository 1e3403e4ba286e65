/**
 * GET /v1/stream over real HTTP, fed by real LISTEN/NOTIFY: a command through the API reaches a
 * connected client as an event of its topic within a deadline; a burst of notifications is coalesced to
 * at most one event per topic per second (leading + trailing); the cookie session authenticates it;
 * and many clients connecting and disconnecting leave no client, timer, LISTEN handler or connection
 * behind. What a client receives conforms to the document's `text/event-stream` schema.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channels } from '../../src/ports/wakeups.js';
import { waitFor } from '../../src/testing/wait.js';
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
  api = await startTestApi();
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
) {
  const abort = new AbortController();
  const response = await fetch(`${api.url}${path}`, { headers, signal: abort.signal });
  const frames: Frame[] = [];
  const comments: string[] = [];
  // Whole frames as received, checked against the document's text/event-stream schema on close.
  let received = '';
  const conform = (text: string) =>
    checkConformance(api.url, {
      method: 'GET',
      path,
      status: response.status,
      contentType: response.headers.get('content-type'),
      text,
    });
  let done: Promise<void> = Promise.resolve();
  if (!response.ok) await conform(await response.text());
  else if (response.body) {
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
    for (let i = 0; i < 30; i++) await api.t.db.query('select pg_notify($1, $2)', [channel, '']);
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
    await api.t.db.query('select pg_notify($1, $2)', [channels.changed(api.t.schema, 'cron_job'), '']);
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
});
