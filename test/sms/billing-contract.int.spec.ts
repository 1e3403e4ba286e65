/**
 * The billing port's contract (src/testing/billing-contract.ts) against both implementations: the
 * PostgreSQL ledger (the default) on a real database, and the HTTP billing client over real HTTP to the
 * billing test server — with a bearer token, and over HTTPS with a client certificate (mTLS). The same
 * cases and assertions: keys applied once, reversals whole and once, a reversed key refusing its late
 * deduction, a short balance charging nothing, zero refused, organizations apart, and the balance adding
 * up under concurrent operations with repeated keys.
 */
import type { HttpBillingClient } from '../../src/adapters/http/billing-client.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import type { BillingSimulator } from '../../src/aggregates/campaign/sms/billing-simulator.js';
import { describeBillingContract } from '../../src/testing/billing-contract.js';
import {
  startMtlsBillingServer,
  startTestBillingServer,
  testBillingClient,
  testCertificates,
} from '../support/billing.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase | undefined;
describeBillingContract('PostgresLedger', {
  async open() {
    t = await createTestDatabase();
    const ledger = new PostgresLedger(t.db);
    return {
      billing: ledger,
      credit: async (organizationId, amount) => {
        await ledger.credit({ organizationId, key: `top-up-${Math.random()}`, amount });
      },
      balance: async (organizationId) => (await ledger.totals(organizationId))?.balance ?? '0.0000',
      entries: async (organizationId) => await ledger.entries(organizationId),
    };
  },
  close: async () => t?.drop(),
});

/** The HTTP client against a billing test server: the server's own ledger is the one read. */
function httpFixture(
  start: () => Promise<BillingSimulator>,
  client: (server: BillingSimulator) => HttpBillingClient,
) {
  let server: BillingSimulator | undefined;
  let http: HttpBillingClient | undefined;
  return {
    async open() {
      server = await start();
      http = client(server);
      const s = server;
      return {
        billing: http,
        credit: async (organizationId: string, amount: string) => {
          s.credit(organizationId, amount);
        },
        balance: async (organizationId: string) => s.balance(organizationId),
        entries: async (organizationId: string) => s.entries(organizationId),
      };
    },
    async close() {
      await http?.close();
      await server?.close();
    },
  };
}

describeBillingContract(
  'HTTP billing client (bearer token)',
  // Generous timeouts: the contract is about answers, not faults (billing-http.int.spec.ts plays those).
  httpFixture(startTestBillingServer, (server) => testBillingClient(server, { timeoutMs: 5_000 })),
);

describeBillingContract(
  'HTTP billing client (mTLS)',
  httpFixture(startMtlsBillingServer, (server) => {
    const c = testCertificates();
    return testBillingClient(server, {
      timeoutMs: 5_000,
      bearerToken: undefined,
      tls: { caPath: c.caPath, certPath: c.client.certPath, keyPath: c.client.keyPath },
    });
  }),
);
