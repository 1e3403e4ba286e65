/**
 * The SMS controls over the HTTP API (a real socket): pause / resume / cancel with a reason (the key as
 * the actor), reschedule validated as creation (422 naming `scheduledAt` or `dispatchDeadline`), illegal
 * states as 409 naming the current status, the resend preview and the resend (its charge equal to the
 * preview, replayed with the same Idempotency-Key without a second charge), 409 while refunds are
 * pending, 402 when the balance does not cover it, 404 for another organization's campaign.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BillingOperation,
  type BillingPort,
  type BillingReceipt,
  PostgresLedger,
} from '../../src/aggregates/campaign/sms/billing.js';
import { BillingUnavailableError } from '../../src/errors.js';
import { inlineRequest, msisdns } from '../support/sms.js';
import { ALWAYS_OPEN, deliveryFixture, ledgerEntries } from '../support/sms-delivery.js';
import { type ApiFixture, expectProblem, startTestApi } from './support/api.js';

const ORG = 'org-sms'; // the delivery fixture's organization
let api: ApiFixture;
let key: string;
let otherKey: string;
let ledger: PostgresLedger;

class RefundsDown implements BillingPort {
  down = false;
  constructor(readonly ledger: PostgresLedger) {}
  deduct(operation: BillingOperation): Promise<BillingReceipt> {
    return this.ledger.deduct(operation);
  }
  refund(operation: BillingOperation): Promise<BillingReceipt> {
    if (this.down) return Promise.reject(new BillingUnavailableError('down (test)', {}));
    return this.ledger.refund(operation);
  }
  reverse(organizationId: string, k: string, reason: string): Promise<BillingReceipt> {
    return this.ledger.reverse(organizationId, k, reason);
  }
}
let billing: RefundsDown;
let f: ReturnType<typeof deliveryFixture>;

beforeAll(async () => {
  api = await startTestApi(ALWAYS_OPEN);
  key = await api.key(ORG);
  otherKey = await api.key('org-other');
  ledger = new PostgresLedger(api.t.db);
  billing = new RefundsDown(ledger);
  f = deliveryFixture(api.t, { billing, random: () => 0 });
  await ledger.credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
});
afterAll(async () => {
  await api?.close();
});

const post = (path: string, body?: unknown, headers: Record<string, string> = {}, k = key) =>
  api.request('POST', path, { key: k, ...(body !== undefined ? { body } : {}), headers });

async function createSms(overrides: Record<string, unknown> = {}) {
  const reply = await post('/v1/campaigns', { channel: 'sms', ...inlineRequest(), ...overrides });
  expect(reply.status, reply.text).toBe(201);
  return reply.body as { campaignId: string; status: string };
}

async function dhakaLocal(days: number, time: string) {
  const { rows } = await api.t.db.query<{ day: string }>(
    `select to_char((now() at time zone 'Asia/Dhaka') + make_interval(days => $1), 'YYYY-MM-DD') as day`,
    [days],
  );
  const local = `${rows[0]!.day}T${time}:00`;
  return { local, instant: new Date(`${local}+06:00`).toISOString() };
}

/** A PARTIAL campaign (one delivered, one rejected) created over the API and rolled up. */
async function partial(): Promise<string> {
  const c = await createSms({
    templateType: 'GENERIC',
    template: 'ঈদ মোবারক!',
    recipients: msisdns(2, '017', 900 + Math.floor(Math.random() * 1000)).map((msisdn) => ({ msisdn })),
  });
  await f.dispatchAll();
  const [a, b] = await f.rows(c.campaignId);
  await f.report(c.campaignId, [
    { row: a!, status: 'DELIVERED' },
    { row: b!, status: 'REJECTED' },
  ]);
  await f.rollup.rollUpCampaign(c.campaignId);
  return c.campaignId;
}

describe('pause, resume, cancel', () => {
  it('carry a reason and the key as actor; an illegal state is 409 naming the status', async () => {
    const c = await createSms();
    expect(c.status).toBe('QUEUED');
    const paused = await post(`/v1/campaigns/${c.campaignId}/pause`, { reason: 'hold on' });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body).toMatchObject({ status: 'PAUSED', pausedFrom: 'QUEUED', pauseReason: 'hold on' });
    const again = await post(`/v1/campaigns/${c.campaignId}/pause`, { reason: 'again' });
    expectProblem(again, 409);
    expect(again.body.currentStatus).toBe('PAUSED');
    const unknownField = await post(`/v1/campaigns/${c.campaignId}/resume`, { why: 'x' });
    expect(unknownField.status).toBe(400);
    const resumed = await post(`/v1/campaigns/${c.campaignId}/resume`, { reason: 'go' });
    expect(resumed.body).toMatchObject({ status: 'QUEUED', pauseReason: null });
    const bare = await post(`/v1/campaigns/${c.campaignId}/pause`); // no body: no reason
    expect(bare.body).toMatchObject({ status: 'PAUSED', pauseReason: null });
    const cancelled = await post(`/v1/campaigns/${c.campaignId}/cancel`, { reason: 'wrong list' });
    expect(cancelled.body).toMatchObject({ status: 'CANCELLING' });
    const { rows } = await api.t.db.query<{ actor: string }>(
      `select meta->>'actor' as actor from event where stream_id = $1 and type = 'CampaignCancellationRequested'`,
      [c.campaignId],
    );
    expect(rows[0]!.actor).toMatch(/^api-key:/);
    expectProblem(await post(`/v1/campaigns/${c.campaignId}/cancel`), 409);
    expectProblem(await post(`/v1/campaigns/${c.campaignId}/pause`, undefined, {}, otherKey), 404);
  });
});

describe('the commands a campaign view offers', () => {
  it('are those its state allows: a dispatching SMS campaign offers cancel, and cancel is accepted', async () => {
    const c = await createSms();
    const queued = await api.request('GET', `/v1/campaigns/${c.campaignId}`, { key });
    expect(queued.body.commands).toEqual(['send-now', 'pause', 'cancel', 'delete']);
    await f.dispatchAll();
    const dispatching = await api.request('GET', `/v1/campaigns/${c.campaignId}`, { key });
    expect(dispatching.body.status).toBe('DISPATCHING');
    expect(dispatching.body.commands).toEqual(['pause', 'cancel']);
    const cancelled = await post(`/v1/campaigns/${c.campaignId}/cancel`, { reason: 'offered, so allowed' });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'CANCELLING', commands: [] });
  });
});

describe('reschedule', () => {
  it('validates scheduledAt as creation does (422 naming it) and moves the deadline', async () => {
    const first = await dhakaLocal(1, '10:00');
    const c = await createSms({ scheduleType: 'SCHEDULED', scheduledAt: first.local });
    expect(c.status).toBe('SCHEDULED');
    const next = await dhakaLocal(2, '14:00');
    const moved = await post(`/v1/campaigns/${c.campaignId}/reschedule`, {
      scheduledAt: next.local,
      reason: 'later',
    });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body).toMatchObject({ status: 'SCHEDULED', startAt: next.instant });
    expect(Date.parse(moved.body.dispatchDeadline) - Date.parse(next.instant)).toBe(1_440 * 60_000);

    const tooFar = await post(`/v1/campaigns/${c.campaignId}/reschedule`, {
      scheduledAt: (await dhakaLocal(60, '10:00')).local,
    });
    expectProblem(tooFar, 422, 'scheduledAt');
    expect(tooFar.body.errors[0].rule).toBe('scheduledAt.max-future');
    expectProblem(await post(`/v1/campaigns/${c.campaignId}/reschedule`, {}), 422, 'scheduledAt');
    expectProblem(
      await post(`/v1/campaigns/${c.campaignId}/reschedule`, {
        scheduledAt: next.local,
        dispatchDeadline: '2030-01-01T00:00:00Z',
      }),
      422,
      'dispatchDeadline',
    );
    const queued = await createSms();
    const illegal = await post(`/v1/campaigns/${queued.campaignId}/reschedule`, { scheduledAt: next.local });
    expectProblem(illegal, 409);
    expect(illegal.body.currentStatus).toBe('QUEUED');
  });
});

describe('resend', () => {
  it('preview then resend: the charge equals the preview; the Idempotency-Key replays without a second charge', async () => {
    const id = await partial();
    const preview = await post(`/v1/campaigns/${id}/resend/preview`);
    expect(preview.status, preview.text).toBe(200);
    expect(preview.body).toMatchObject({
      campaignId: id,
      status: 'PARTIAL',
      recipients: 1,
      currentResendAttempt: 0,
      nextResendAttempt: 1,
      refundsPending: 0,
    });
    const headers = { 'idempotency-key': `resend-${id}` };
    const resent = await post(`/v1/campaigns/${id}/resend`, { reason: 'once more' }, headers);
    expect(resent.status, resent.text).toBe(200);
    expect(resent.body).toMatchObject({ status: 'QUEUED', resendAttempt: 1 });
    const replay = await post(`/v1/campaigns/${id}/resend`, { reason: 'once more' }, headers);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const charge = (await ledgerEntries(api.t, 'deduction')).get(preview.body.chargeKey)!;
    expect(charge).toEqual({ key: preview.body.chargeKey, amount: preview.body.cost, n: 1 });
    // Now QUEUED: a resend or its preview is 409 naming the status.
    const illegal = await post(`/v1/campaigns/${id}/resend/preview`);
    expectProblem(illegal, 409);
    expect(illegal.body.currentStatus).toBe('QUEUED');
    expectProblem(await post(`/v1/campaigns/${id}/resend/preview`, undefined, {}, otherKey), 404);
  });

  it('409 while refunds are pending', async () => {
    billing.down = true;
    const id = await partial();
    billing.down = false;
    const preview = await post(`/v1/campaigns/${id}/resend/preview`);
    expect(preview.body.refundsPending).toBe(1);
    const refused = await post(`/v1/campaigns/${id}/resend`);
    expectProblem(refused, 409);
    expect(refused.body.detail).toMatch(/pending/);
    expect((await ledgerEntries(api.t, 'deduction')).get(preview.body.chargeKey)).toBeUndefined();
  });

  it('402 when the balance does not cover it; nothing changes', async () => {
    const id = await partial();
    const preview = await post(`/v1/campaigns/${id}/resend/preview`);
    const { rows } = await api.t.db.query<{ balance: string }>(
      'select balance::text from billing_account where organization_id = $1',
      [ORG],
    );
    // Spend the balance down to just below the resend's cost.
    const spend = (Number(rows[0]!.balance) - Number(preview.body.cost) + 0.0001).toFixed(4);
    await ledger.deduct({ organizationId: ORG, key: `spend-${id}`, amount: spend });
    const refused = await post(`/v1/campaigns/${id}/resend`);
    expectProblem(refused, 402);
    const after = await api.request('GET', `/v1/campaigns/${id}`, { key });
    expect(after.body).toMatchObject({ status: 'PARTIAL', resendAttempt: 0 });
    await ledger.credit({ organizationId: ORG, key: `refill-${id}`, amount: '1000' });
  });
});
