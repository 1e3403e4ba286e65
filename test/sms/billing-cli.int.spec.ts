/**
 * The CLI with HERALD_BILLING=http (the real `herald` process): `herald billing credit|balance` refuses
 * (credits and balances are the billing service's, not Herald's ledger's) naming the service, and
 * `herald campaigns show` prints the campaign's money without comparing it to Herald's empty ledger.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type BillingMoneyFixture, billingEnv, billingMoneyFixture } from '../support/billing.js';
import { herald } from '../support/cli.js';
import { inlineRequest, ORG } from '../support/sms.js';

let m: BillingMoneyFixture;
beforeAll(async () => {
  m = await billingMoneyFixture();
  m.server.credit(ORG, '100', 'top-up');
});
afterAll(async () => m?.close());

it('herald billing credit is refused with HERALD_BILLING=http, naming the billing service', async () => {
  const result = await herald(m.t, ['billing', 'credit', ORG, '5', '--key', 'k-1'], billingEnv(m.server));
  expect(result.code).toBe(2);
  expect(result.stderr).toContain(`kept by the billing service at ${m.server.url}`);
  expect(m.server.entries(ORG).filter((e) => e.key === 'k-1')).toEqual([]);
});

it('herald campaigns show prints the money and says the ledger side is the billing service’s', async () => {
  const created = await m.service.create(inlineRequest(), { organizationId: ORG });
  const id = created.body.campaignId;
  const result = await herald(m.t, ['campaigns', 'show', id], billingEnv(m.server));
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout).toContain(`charged campaign:${id}`);
  expect(result.stdout).toContain('money check: not run here (HERALD_BILLING=http)');
});
