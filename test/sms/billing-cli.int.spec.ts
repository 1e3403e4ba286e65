/**
 * The CLI with HERALD_BILLING=http (the real `herald` process): `herald billing credit|balance` refuses
 * (credits and balances are the billing service's, not Herald's ledger's) naming the service, and
 * `herald campaigns show` prints the campaign's money without comparing it to Herald's empty ledger.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { type BillingMoneyFixture, billingEnv, billingMoneyFixture } from '../support/billing.js';
import { herald, spawnHerald } from '../support/cli.js';
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

it('herald billing-simulator serves the billing contract as a process: credits, one charge per key, 402, bearer, clean stop', async () => {
  const server = spawnHerald(
    ['billing-simulator', '--port', '0', '--token', 'staging-token', '--credit', 'org-cli:10'],
    { DATABASE_URL: m.t.url, HERALD_LOG_LEVEL: 'info' },
  );
  try {
    const url = await waitFor(
      () => /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*billing simulator listening/.exec(server.output())?.[1],
      { timeoutMs: 30_000, what: `the simulator's url (output: ${server.output()})` },
    );
    const deduct = (key: string, amount: string, token = 'staging-token') =>
      fetch(`${url}/organizations/org-cli/deductions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ key, amount }),
      });
    expect((await deduct('charge-1', '4')).status).toBe(201);
    expect((await deduct('charge-1', '4')).status).toBe(200); // the same key: the first receipt, applied once
    expect((await deduct('charge-2', '7')).status).toBe(402); // 6 left
    expect((await deduct('charge-3', '1', 'wrong')).status).toBe(401);
    expect(await server.stop(10_000)).toBe(0);
    expect(server.output()).toContain('"balances":{"org-cli":"6');
  } finally {
    await server.stop(5_000);
  }
});
