/**
 * A CSV build's final charge through the HTTP billing adapter, on real PostgreSQL and real HTTP to the
 * billing test server: billing does not answer → the upload CHARGING (saying why), the campaign BUILDING
 * with its recipients, nothing queued, the build never redone; the charge retry asks again with the same
 * `campaign:{id}` → QUEUED, one deduction in the server's ledger; past the give-up window the key is
 * reversed and the campaign FAILED. A short balance → FAILED, the upload FAILED saying why, recipients
 * cleared, nothing charged or queued. ADR 0023.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadUpload } from '../../src/adapters/postgres/sms-queries.js';
import { smsBuildSweeper, smsChargeRetrySweeper } from '../../src/aggregates/campaign/sms/build.js';
import { waitFor } from '../../src/testing/wait.js';
import { type BillingMoneyFixture, billingMoneyFixture } from '../support/billing.js';
import { msisdns, ORG, silentLogger } from '../support/sms.js';

let m: BillingMoneyFixture;
beforeAll(async () => {
  m = await billingMoneyFixture();
  m.server.credit(ORG, '100000', 'top-up');
});
afterAll(async () => m?.close());

describe('CSV build', () => {
  const meta = {
    name: 'Boishakh sale',
    messageType: 'PROMOTIONAL',
    lang: 'bn',
    campaignId: 'BTRC-2030-009',
    templateType: 'GENERIC',
    template: 'পহেলা বৈশাখে ৩০% ছাড়!',
  };
  const csv = (n: number, offset: number) => `msisdn\n${msisdns(n, '017', offset).join('\n')}\n`;
  async function* once(text: string) {
    yield Buffer.from(text, 'utf8');
  }
  const builder = () =>
    smsBuildSweeper({
      db: m.t.db,
      handler: m.handler,
      logger: silentLogger,
      billing: m.billing,
      settings: m.settings,
      charge: { retryMs: 0, giveUpMs: 3_600_000 },
    });
  const retrier = (giveUpMs = 3_600_000) =>
    smsChargeRetrySweeper({
      db: m.t.db,
      handler: m.handler,
      logger: silentLogger,
      billing: m.billing,
      settings: m.settings,
      charge: { retryMs: 0, giveUpMs },
    });

  async function built(org: string, offset: number) {
    const created = await m.service.createBulk(meta, once(csv(5, offset)), { organizationId: org });
    const id = created.body.campaign.campaignId;
    const sweeper = builder();
    await waitFor(async () => (await sweeper.sweep()).processed > 0 || undefined, {
      what: 'the build claimed',
    });
    return { id, outcome: sweeper.builder.outcomes.at(-1)! };
  }

  it('502: the upload waits in CHARGING saying why, nothing queued; the retry charges the same key once → QUEUED', async () => {
    const org = 'org-build-502';
    m.server.credit(org, '100', 'top-up');
    m.server.inject({ kind: 'hold', apply: true }, { organizationId: org, operation: 'deduction' });
    m.server.inject(
      { kind: 'status', status: 503 },
      { times: 2, organizationId: org, operation: 'deduction' },
    );
    const { id, outcome } = await built(org, 1_000);
    expect(outcome).toMatchObject({ status: 'CHARGING', accepted: 5 });
    const key = `campaign:${id}`;
    const upload = (await loadUpload(m.t.db, id))!;
    expect(upload.status).toBe('CHARGING');
    expect(upload.error).toMatch(/billing did not answer .*retried with the same key/);
    const c = await m.service.get(id);
    expect(c.status).toBe('BUILDING');
    expect(c.sms).toMatchObject({ recipients: 5, chargeKey: null });
    expect(await m.outboxRowsOf(id)).toBe(0);
    expect(m.deductions(org, key)).toHaveLength(1); // the held first attempt was applied

    // The build sweep does not take a CHARGING upload over (no rebuild, no second charge).
    expect((await builder().sweep()).processed).toBe(0);
    m.server.inject(
      { kind: 'status', status: 500 },
      { times: 3, organizationId: org, operation: 'deduction' },
    );
    const r = retrier();
    await r.sweep();
    expect(r.outcomes).toEqual([expect.objectContaining({ status: 'CHARGING' })]);
    expect((await loadUpload(m.t.db, id))!.error).toMatch(/try 2/);

    await r.sweep();
    expect(r.outcomes.at(-1)).toMatchObject({ status: 'QUEUED' });
    expect(await loadUpload(m.t.db, id)).toMatchObject({ status: 'DONE', error: null });
    const queued = await m.service.get(id);
    expect(queued.status).toBe('QUEUED');
    expect(queued.sms).toMatchObject({ chargeKey: key, totalCost: m.deductions(org, key)[0]!.amount });
    expect(m.deductions(org, key)).toHaveLength(1);
    expect(m.refunds(org, key)).toEqual([]);
    expect(m.server.requests.filter((rq) => rq.key === key).map((rq) => rq.outcome)).toEqual([
      'fault:hold-after-201',
      'fault:status-503',
      'fault:status-503',
      'fault:status-500',
      'fault:status-500',
      'fault:status-500',
      'repeat',
    ]);
  });

  it('unanswered past the give-up window: reversed by its key first, then FAILED; the upload says why', async () => {
    const org = 'org-build-giveup';
    m.server.credit(org, '100', 'top-up');
    m.server.inject({ kind: 'lose' }, { times: 3, organizationId: org, operation: 'deduction' });
    const { id, outcome } = await built(org, 2_000);
    expect(outcome.status).toBe('CHARGING');
    const key = `campaign:${id}`;
    expect(m.deductions(org, key)).toHaveLength(1);
    const r = retrier(0);
    await r.sweep();
    expect(r.outcomes).toEqual([expect.objectContaining({ status: 'FAILED' })]);
    const upload = (await loadUpload(m.t.db, id))!;
    expect(upload).toMatchObject({ status: 'FAILED' });
    expect(upload.error).toMatch(/reversed by campaign:/);
    expect((await m.service.get(id)).status).toBe('FAILED');
    expect(m.refunds(org, key).map((e) => e.amount)).toEqual([m.deductions(org, key)[0]!.amount]);
    expect(m.server.balance(org)).toBe('100.0000');
    expect(await m.outboxRowsOf(id)).toBe(0);
  });

  it('insufficient balance: FAILED, the upload FAILED saying why, recipients cleared, nothing charged or queued', async () => {
    const org = 'org-build-poor';
    m.server.credit(org, '0.5', 'top-up');
    const { id, outcome } = await built(org, 3_000);
    expect(outcome).toMatchObject({ status: 'FAILED', accepted: 5 });
    const upload = (await loadUpload(m.t.db, id))!;
    expect(upload.status).toBe('FAILED');
    expect(upload.error).toMatch(
      /^charging 1\.5000 failed: billing refused campaign:.* has 0\.5000, 1\.5000 needed/,
    );
    const c = await m.service.get(id);
    expect(c.status).toBe('FAILED');
    expect(c.sms).toMatchObject({ recipients: 0, chargeKey: null });
    expect(
      (await m.t.db.query(`select 1 from campaign_recipient where campaign_id = $1`, [id])).rowCount,
    ).toBe(0);
    expect(m.server.entries(org).filter((e) => e.kind !== 'credit')).toEqual([]);
    expect(m.server.balance(org)).toBe('0.5000');
    expect(await m.outboxRowsOf(id)).toBe(0);
  });
});
