/**
 * `herald/client` against a real `herald api` (the API tests' fixture: a test database, a loopback
 * socket): automatic Idempotency-Keys and their replay, a key named by the call, refusals as typed
 * errors naming the field, retries of a real 429 after its Retry-After with the same key (the
 * authentication throttle; the stream's per-key limit), pagination across pages, and the live stream
 * telling a change a command made. Waits go through the client's injected sleep: nothing here waits for
 * a Retry-After.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createHeraldClient,
  type HeraldClientOptions,
  HeraldNotFoundError,
  HeraldProblemError,
  HeraldRateLimitError,
  HeraldValidationError,
  type StreamEvent,
} from '../../src/client/index.js';
import { waitFor } from '../../src/testing/wait.js';
import { type ApiFixture, lineCampaignBody, startTestApi } from '../api/support/api.js';

let api: ApiFixture;
let key: string;

beforeAll(async () => {
  api = await startTestApi({
    // Two failed authentications from an address throttle it (the 429 of the retry test).
    HERALD_API_AUTH_FAILURE_LIMIT: '2',
    HERALD_API_AUTH_FAILURE_WINDOW_SECONDS: '30',
    // One live stream per key (the stream's 429).
    HERALD_API_STREAMS_PER_KEY: '1',
  });
  key = await api.key('org-client');
}, 60_000);
afterAll(async () => api?.close());

const client = (options: Partial<HeraldClientOptions> = {}) =>
  createHeraldClient({ baseUrl: api.url, credential: key, ...options });

/** Counts the keys it makes: `key-1`, `key-2`, … */
function keys() {
  const made: string[] = [];
  return { made, make: () => made[made.push(`key-${made.length + 1}-${crypto.randomUUID()}`) - 1]! };
}

const action = {
  mode: 'normal',
  actionType: 'send_message',
  actionConfig: { template: 'hi' },
  delaySeconds: 3600,
} as const;

describe('herald/client', () => {
  it('gives each command an Idempotency-Key: a replay with the same key answers the same resource', async () => {
    const made = keys();
    const herald = client({ idempotencyKey: made.make });
    const created = await herald.POST('/v1/campaigns', { body: lineCampaignBody() as never });
    expect(made.made).toHaveLength(1);
    expect(created.requestIdempotencyKey).toBe(made.made[0]);
    // Another client that makes the same key (a process restarted mid-request): the same campaign.
    const again = await client({ idempotencyKey: () => made.made[0]! }).POST('/v1/campaigns', {
      body: lineCampaignBody() as never,
    });
    expect(again.campaignId).toBe(created.campaignId);
    // A key per command, a GET none.
    const action1 = await herald.POST('/v1/actions', { body: action });
    const action2 = await herald.POST('/v1/actions', { body: action });
    expect(action1.actionId).not.toBe(action2.actionId);
    await herald.GET('/v1/actions/{id}', { params: { path: { id: action1.actionId } } });
    expect(made.made).toHaveLength(3);
    const read = await herald.GET('/v1/actions/{id}', { params: { path: { id: action2.actionId } } });
    expect(read.idempotencyKey).toBe(made.made[2]);
  });

  it('types paths, parameters, bodies and answers from the document (tsc fails otherwise)', () => {
    const herald = client();
    const typed = async () => {
      // @ts-expect-error: no such path
      await herald.GET('/v1/nope');
      // @ts-expect-error: the path parameter is required
      await herald.GET('/v1/campaigns/{id}');
      // @ts-expect-error: a body field of the wrong type
      await herald.POST('/v1/actions', { body: { ...action, delaySeconds: 'soon' } });
      // @ts-expect-error: GET /v1/actions takes no body and POST /v1/actions/{id} does not exist
      await herald.POST('/v1/actions/{id}', { params: { path: { id: 'x' } } });
      const campaign = await herald.GET('/v1/campaigns/{id}', { params: { path: { id: 'x' } } });
      // @ts-expect-error: not a member of Campaign
      campaign.nope;
      for await (const run of herald.paginate('/v1/cron-jobs/{id}/runs', { params: { path: { id: 'x' } } })) {
        const scheduledFor: string = run.scheduledFor;
        return [campaign.status, scheduledFor];
      }
      // @ts-expect-error: GET /v1/campaigns/{id} is not a paged list
      herald.paginate('/v1/campaigns/{id}', { params: { path: { id: 'x' } } });
    };
    expect(typeof typed).toBe('function');
  });

  it('sends the key a call names instead of its own', async () => {
    const made = keys();
    const herald = client({ idempotencyKey: made.make });
    const mine = `mine-${crypto.randomUUID()}`;
    const created = await herald.POST('/v1/cron-jobs', {
      params: { header: { 'idempotency-key': mine } },
      body: {
        name: 'client nightly',
        schedule: '0 3 * * *',
        timezone: 'UTC',
        jobType: 'ping',
        payload: { url: 'https://example.com/health' },
      },
    });
    expect(created.idempotencyKey).toBe(mine);
    expect(made.made).toEqual([]);
  });

  it('throws a 422 as a HeraldValidationError naming the field, a 404 as a HeraldNotFoundError', async () => {
    const herald = client();
    const invalid = await herald
      .POST('/v1/campaigns', { body: lineCampaignBody({ castType: null }) as never })
      .catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(HeraldValidationError);
    const problem = invalid as HeraldValidationError;
    expect(problem).toMatchObject({ status: 422, kind: 'validation-failed', code: 'VALIDATION_FAILED' });
    expect(problem.fieldErrors('castType')).toHaveLength(1);
    expect(problem.requestId).toEqual(expect.any(String));

    const missing = await herald
      .GET('/v1/campaigns/{id}', { params: { path: { id: crypto.randomUUID() } } })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(HeraldNotFoundError);
    expect(missing).toBeInstanceOf(HeraldProblemError);
    expect(missing).toMatchObject({ status: 404, kind: 'not-found', type: 'urn:herald:problem:not-found' });
  });

  it('retries a 429 after its Retry-After, with the same Idempotency-Key', async () => {
    // Two wrong keys from this address: its requests with credentials answer 429 until the window ends.
    for (let i = 0; i < 2; i++) {
      const r = await api.request('GET', '/v1/actions', { key: 'hk_wrong', conformance: false });
      expect(r.status).toBe(401);
    }
    const waits: number[] = [];
    // The Retry-After of each 429 the server answered, as the client's fetch saw it.
    const asked: number[] = [];
    const fetch = async (request: Request) => {
      const response = await globalThis.fetch(request);
      if (response.status === 429) asked.push(Number(response.headers.get('retry-after')) * 1000);
      return response;
    };
    const made = keys();
    const herald = client({
      fetch,
      idempotencyKey: made.make,
      retries: {
        // Whatever the throttle asks (2 s today; the window's rest, at most 30 s, per ADR 0029).
        maxDelayMs: 60_000,
        // The window ends early: the throttle's rows go (what the end of the window does).
        sleep: async (ms) => {
          waits.push(ms);
          await api.t.db.query('delete from auth_failure');
        },
      },
    });
    const created = await herald.POST('/v1/actions', { body: action });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toBeGreaterThan(0);
    expect(waits).toEqual(asked);
    expect(made.made).toHaveLength(1);
    expect(created.idempotencyKey).toBe(made.made[0]);

    // Without retries the 429 is the caller's, typed, with its Retry-After.
    for (let i = 0; i < 2; i++)
      await api.request('GET', '/v1/actions', { key: 'hk_wrong', conformance: false });
    const refused = await client({ fetch, retries: false })
      .GET('/v1/actions')
      .catch((e: unknown) => e);
    await api.t.db.query('delete from auth_failure');
    expect(refused).toBeInstanceOf(HeraldRateLimitError);
    expect(refused).toMatchObject({ status: 429, kind: 'auth-throttled', retryAfterMs: asked[1] });
  });

  it('follows the cursors across pages', async () => {
    const herald = client();
    const workflowId = `wf-${crypto.randomUUID()}`;
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++)
      ids.add((await herald.POST('/v1/actions', { body: { ...action, workflowId } })).actionId);
    const query = { workflowId, limit: 2 };
    const pages = [];
    for await (const page of herald.pages('/v1/actions', { params: { query } }))
      pages.push(page.items.length);
    expect(pages).toEqual([2, 2, 1]);
    const seen: string[] = [];
    for await (const item of herald.paginate('/v1/actions', { params: { query } })) seen.push(item.actionId);
    expect(new Set(seen)).toEqual(ids);
    expect(seen).toHaveLength(5);
  });

  it('streams the change a command makes, and closes on break', async () => {
    const herald = client();
    let opened!: () => void;
    const open = new Promise<void>((resolve) => {
      opened = resolve;
    });
    const events: StreamEvent[] = [];
    const reading = (async () => {
      for await (const event of herald.stream({ topics: ['actions'], onOpen: opened })) {
        events.push(event);
        break;
      }
    })();
    await open;
    await herald.POST('/v1/actions', { body: action });
    await waitFor(() => events.length > 0, { timeoutMs: 10_000, what: 'an actions event' });
    await reading;
    expect(events).toEqual([{ topic: 'actions', at: expect.any(String), reconnected: false }]);
    const hub = api.server.app.heraldStream;
    await waitFor(() => hub.stats().clients === 0, { timeoutMs: 5_000, what: 'the stream closed' });
  });

  it("retries the stream's 429 (one stream per key) once the other stream closed", async () => {
    const hub = api.server.app.heraldStream;
    const first = new AbortController();
    let opened!: () => void;
    const open = new Promise<void>((resolve) => {
      opened = resolve;
    });
    const holding = (async () => {
      for await (const _ of client().stream({ signal: first.signal, onOpen: opened })) {
        // held open until aborted
      }
    })();
    await open;
    const waits: number[] = [];
    const second = new AbortController();
    const herald = client({
      retries: {
        sleep: async (ms) => {
          waits.push(ms);
          first.abort();
          await holding;
          await waitFor(() => hub.stats().clients === 0, {
            timeoutMs: 5_000,
            what: 'the first stream closed',
          });
        },
      },
    });
    let secondOpen = false;
    for await (const _ of herald.stream({
      signal: second.signal,
      onOpen: () => {
        secondOpen = true;
        second.abort();
      },
    })) {
      // ends when aborted
    }
    expect(secondOpen).toBe(true);
    expect(waits).toEqual([2_000]);
  });
});
