/**
 * `/v1/actions`, `/v1/signals` and `/v1/subjects` over a real socket: happy paths, 400/422 naming the
 * field, 409 naming the status; a signal unlocks the organization's wait in its own transaction.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, dbTime, expectIllegal, expectProblem, startTestApi } from './support/api.js';

let api: ApiFixture;
let key: string;

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key('org-actions');
});
afterAll(async () => {
  await api?.close();
});

const normal = (overrides: Record<string, unknown> = {}) => ({
  mode: 'normal',
  actionType: 'send_message',
  actionConfig: { template: 'hello' },
  delaySeconds: 3600,
  ...overrides,
});
const post = (path: string, body?: unknown) =>
  api.request('POST', path, { key, ...(body === undefined ? {} : { body }) });
const schedule = async (body: Record<string, unknown> = normal()) => {
  const r = await post('/v1/actions', body);
  expect(r.status, r.text).toBe(201);
  return r.body as { actionId: string; status: string };
};

describe('POST /v1/actions', () => {
  it('schedules a normal action and a wait', async () => {
    const a = await post('/v1/actions', normal());
    expect(a.status).toBe(201);
    expect(a.body).toMatchObject({
      status: 'pending',
      mode: 'normal',
      organizationId: 'org-actions',
      maxRetries: 3,
    });
    expect(a.headers.get('location')).toBe(`/v1/actions/${a.body.actionId}`);
    const wait = await schedule({
      mode: 'waitForSignal',
      actionType: 'send_message',
      actionConfig: { template: 'thanks' },
      expiresSeconds: 3600,
      wait: { names: ['clicked'], correlationKey: 'customer-1:node-1' },
      expiry: { actionType: 'send_message', actionConfig: { template: 'resend' } },
    });
    expect(wait.status).toBe('pending');
  });

  it('400 for the shape, 422 for the domain rules, naming the field', async () => {
    expectProblem(await post('/v1/actions', normal({ mode: 'later' })), 400, 'mode');
    expectProblem(await post('/v1/actions', normal({ organizationId: 'org-other' })), 400, 'organizationId');
    expectProblem(await post('/v1/actions', normal({ delaySeconds: undefined })), 422, 'delaySeconds');
    expectProblem(
      await post('/v1/actions', { ...normal(), mode: 'waitForSignal', delaySeconds: 60 }),
      422,
      'wait',
    );
  });
});

describe('reads', () => {
  it('get, list by status with a cursor, history; 400 and 404', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await schedule(normal({ delaySeconds: 7200 + i }))).actionId);
    const one = await api.request('GET', `/v1/actions/${ids[0]}`, { key });
    expect(one.body.actionId).toBe(ids[0]);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await api.request(
        'GET',
        `/v1/actions?status=pending&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        { key },
      );
      expect(r.status).toBe(200);
      seen.push(...r.body.items.map((a: { actionId: string }) => a.actionId));
      cursor = r.body.nextCursor;
    } while (cursor);
    for (const id of ids) expect(seen).toContain(id);
    expect(new Set(seen).size).toBe(seen.length);
    const history = await api.request('GET', `/v1/actions/${ids[0]}/history`, { key });
    expect(history.body.events[0].type).toBe('ActionScheduled');
    expectProblem(await api.request('GET', '/v1/actions?status=waiting', { key }), 400, 'querystring.status');
    expectProblem(await api.request('GET', '/v1/actions/1', { key }), 400, 'params.id');
    expectProblem(await api.request('GET', `/v1/actions/${crypto.randomUUID()}`, { key }), 404);
  });
});

describe('action commands', () => {
  it('cancel: 200 with the reason; 400 without one; 409 when already cancelled', async () => {
    const a = await schedule();
    expectProblem(await post(`/v1/actions/${a.actionId}/cancel`, {}), 400, 'reason');
    const r = await post(`/v1/actions/${a.actionId}/cancel`, { reason: 'unsubscribed' });
    expect(r.body).toMatchObject({ status: 'cancelled', cancelReason: 'unsubscribed' });
    expectIllegal(await post(`/v1/actions/${a.actionId}/cancel`, { reason: 'again' }), 'cancelled');
  });

  it('fire: claimed at once (processing); 400 for a bad reason; 409 for a cancelled action', async () => {
    const a = await schedule();
    expectProblem(await post(`/v1/actions/${a.actionId}/fire`, { reason: '' }), 400, 'reason');
    const r = await post(`/v1/actions/${a.actionId}/fire`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'processing', firedNow: true, dueBecause: 'fire_now' });
    const cancelled = await schedule();
    await post(`/v1/actions/${cancelled.actionId}/cancel`, { reason: 'x' });
    expectIllegal(
      await post(`/v1/actions/${cancelled.actionId}/fire`, { reason: 'customer called' }),
      'cancelled',
    );
  });

  it("reschedule: a normal action's execute time and a wait's deadline; 400; 409", async () => {
    const a = await schedule();
    const executeAt = await dbTime(api.t, 9000);
    expectProblem(
      await post(`/v1/actions/${a.actionId}/reschedule`, { executeAt: 'soon' }),
      400,
      'executeAt',
    );
    const r = await post(`/v1/actions/${a.actionId}/reschedule`, { executeAt, reason: 'later' });
    expect(r.body).toMatchObject({ status: 'pending', executeAt });
    const wait = await schedule({
      mode: 'waitForSignal',
      actionType: 'x',
      actionConfig: {},
      expiresSeconds: 600,
      wait: { names: ['clicked'], correlationKey: 'c-2' },
    });
    const expiresAt = await dbTime(api.t, 7200);
    const moved = await post(`/v1/actions/${wait.actionId}/reschedule`, { expiresAt });
    expect(moved.body).toMatchObject({ expiresAt, executeAt: expiresAt });
    await post(`/v1/actions/${a.actionId}/cancel`, { reason: 'x' });
    expectIllegal(await post(`/v1/actions/${a.actionId}/reschedule`, { executeAt }), 'cancelled');
  });
});

describe('POST /v1/signals', () => {
  it("unlocks the organization's matching wait; 400 for a bad body", async () => {
    const wait = await schedule({
      mode: 'waitForSignal',
      actionType: 'x',
      actionConfig: {},
      expiresSeconds: 600,
      wait: { names: ['clicked', 'replied'], correlationKey: 'customer-9:node-3' },
    });
    const r = await post('/v1/signals', {
      correlationKey: 'customer-9:node-3',
      name: 'clicked',
      payload: { via: 'email' },
    });
    expect(r.status).toBe(200);
    expect(r.body.unlocked).toEqual([wait.actionId]);
    const unlocked = await api.request('GET', `/v1/actions/${wait.actionId}`, { key });
    expect(unlocked.body.unlockedBy).toMatchObject({ signalId: r.body.signalId, name: 'clicked' });
    expectProblem(await post('/v1/signals', { correlationKey: 'k', name: '' }), 400, 'name');
    expectProblem(await post('/v1/signals', { name: 'clicked' }), 400, 'correlationKey');
  });
});

describe('/v1/subjects', () => {
  it('replaces and reads a subject; 404 for an unknown one; 400 for bad attributes', async () => {
    const put = await api.request('PUT', '/v1/subjects/customer-1', {
      key,
      body: { attributes: { subscribed: true } },
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ subjectId: 'customer-1', attributes: { subscribed: true } });
    const got = await api.request('GET', '/v1/subjects/customer-1', { key });
    expect(got.body.attributes).toEqual({ subscribed: true });
    expectProblem(await api.request('GET', '/v1/subjects/nobody', { key }), 404);
    expectProblem(
      await api.request('PUT', '/v1/subjects/customer-1', { key, body: { attributes: [1] } }),
      400,
      'attributes',
    );
  });
});
