/**
 * Fixtures for billing tests: the billing test server (src/aggregates/campaign/sms/billing-simulator.ts:
 * real HTTP or HTTPS on a loopback port, its own ledger, faults on demand), the HTTP billing client
 * pointed at it with short timeouts, the environment that selects it (HERALD_BILLING=http), and test
 * certificates for mTLS made with openssl (a CA, the server's for 127.0.0.1/localhost, a client's, and
 * a client's from a CA nobody trusts).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpBillingClient, type HttpBillingOptions } from '../../src/adapters/http/billing-client.js';
import { configuredBilling } from '../../src/aggregates/campaign/sms/billing.js';
import {
  type BillingSimulator,
  type BillingSimulatorOptions,
  startBillingSimulator,
} from '../../src/aggregates/campaign/sms/billing-simulator.js';
import { SmsCampaignService } from '../../src/aggregates/campaign/sms/service.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { createTestDatabase } from './services.js';
import { silentLogger } from './sms.js';
import { ALWAYS_OPEN } from './sms-delivery.js';

/** A bearer token for tests (long enough for the logger's secret scrubbing). */
export const TEST_BILLING_TOKEN = 'billing-test-token-7f3c9a2e51d84b06';

export function startTestBillingServer(options: BillingSimulatorOptions = {}): Promise<BillingSimulator> {
  return startBillingSimulator({ host: '127.0.0.1', port: 0, tokens: [TEST_BILLING_TOKEN], ...options });
}

/** The HTTP billing client against `server`: 3 attempts of 400 ms, 10 ms backoff. */
export function testBillingClient(
  server: Pick<BillingSimulator, 'url'>,
  overrides: Partial<HttpBillingOptions> = {},
): HttpBillingClient {
  return new HttpBillingClient({
    baseUrl: server.url,
    timeoutMs: 400,
    attempts: 3,
    retryBackoffMs: 10,
    bearerToken: TEST_BILLING_TOKEN,
    ...overrides,
  });
}

/** The settings that charge through `server` (HERALD_BILLING=http), with short timeouts. */
export function billingEnv(server: Pick<BillingSimulator, 'url'>, extra: Record<string, string> = {}) {
  return {
    HERALD_BILLING: 'http',
    HERALD_BILLING_URL: server.url,
    HERALD_BILLING_TOKEN: TEST_BILLING_TOKEN,
    HERALD_BILLING_TIMEOUT_MS: '400',
    HERALD_BILLING_ATTEMPTS: '3',
    HERALD_BILLING_RETRY_BACKOFF_MS: '10',
    ...extra,
  };
}

export interface TestCertificates {
  dir: string;
  caPath: string;
  server: { cert: string; key: string };
  client: { certPath: string; keyPath: string };
  /** A client certificate from a CA the server does not trust. */
  strangerClient: { certPath: string; keyPath: string };
}

let certificates: TestCertificates | undefined;

/** Generated once per test process with openssl (EC P-256, valid one day). */
export function testCertificates(): TestCertificates {
  if (certificates) return certificates;
  const dir = mkdtempSync(join(tmpdir(), 'herald-billing-tls-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const key = (name: string) =>
    openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', file(name));
  const ca = (name: string) => {
    key(`${name}.key`);
    openssl(
      'req',
      '-x509',
      '-new',
      '-key',
      file(`${name}.key`),
      '-subj',
      `/CN=${name}`,
      '-days',
      '1',
      '-out',
      file(`${name}.crt`),
    );
  };
  const issue = (name: string, issuer: string, extensions: string) => {
    key(`${name}.key`);
    openssl('req', '-new', '-key', file(`${name}.key`), '-subj', `/CN=${name}`, '-out', file(`${name}.csr`));
    writeFileSync(file(`${name}.ext`), extensions);
    openssl(
      'x509',
      '-req',
      '-in',
      file(`${name}.csr`),
      '-CA',
      file(`${issuer}.crt`),
      '-CAkey',
      file(`${issuer}.key`),
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      file(`${name}.ext`),
      '-out',
      file(`${name}.crt`),
    );
  };
  ca('billing-ca');
  ca('stranger-ca');
  issue(
    'billing-server',
    'billing-ca',
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
  );
  issue('billing-client', 'billing-ca', 'extendedKeyUsage=clientAuth\n');
  issue('stranger-client', 'stranger-ca', 'extendedKeyUsage=clientAuth\n');
  certificates = {
    dir,
    caPath: file('billing-ca.crt'),
    server: {
      cert: readFileSync(file('billing-server.crt'), 'utf8'),
      key: readFileSync(file('billing-server.key'), 'utf8'),
    },
    client: { certPath: file('billing-client.crt'), keyPath: file('billing-client.key') },
    strangerClient: { certPath: file('stranger-client.crt'), keyPath: file('stranger-client.key') },
  };
  return certificates;
}

/** The billing server over HTTPS requiring a client certificate the test CA issued (mTLS). */
export function startMtlsBillingServer(options: BillingSimulatorOptions = {}): Promise<BillingSimulator> {
  const c = testCertificates();
  return startTestBillingServer({
    tokens: [],
    tls: { ...c.server, ca: readFileSync(c.caPath), requireClientCert: true },
    ...options,
  });
}

/**
 * The money-path tests' set-up (test/sms/billing-money-*.int.spec.ts): the billing test server, a test
 * database, the configuration that selects HTTP billing (HERALD_BILLING=http) and the port the campaign
 * slice resolves for it, the SMS service and a command handler on that configuration, and readers of the
 * server's ledger and of what a campaign wrote.
 */
export async function billingMoneyFixture() {
  const server = await startTestBillingServer();
  const t = await createTestDatabase();
  const config = t.config({ ...ALWAYS_OPEN, ...billingEnv(server) });
  const billing = configuredBilling(config.billing, t.db);
  const settings = config.sms;
  const handler = new CommandHandler({ db: t.db, pod: 'test', config });
  const service = new SmsCampaignService({
    db: t.db,
    handler,
    billing,
    settings,
    idempotencyTtlMs: 3_600_000,
    logger: silentLogger,
  });
  const count = async (sql: string, params: unknown[]) =>
    (await t.db.query<{ n: number }>(sql, params)).rows[0]!.n;
  return {
    server,
    t,
    config,
    billing,
    settings,
    handler,
    service,
    /** The server's deductions under `key`. */
    deductions: (org: string, key: string) =>
      server.entries(org).filter((e) => e.kind === 'deduction' && e.key === key),
    /** The server's refunds (and reversals) under `key`. */
    refunds: (org: string, key: string) =>
      server.entries(org).filter((e) => e.kind === 'refund' && e.key === key),
    async campaignsOf(org: string) {
      const { rows } = await t.db.query<{ id: string; status: string; failure_reason: string | null }>(
        `select id::text, status, failure_reason from campaign where organization_id = $1 order by created_at`,
        [org],
      );
      return rows;
    },
    eventsOf: (campaignId: string) =>
      count(`select count(*)::int as n from event where stream_type = 'campaign' and stream_id = $1`, [
        campaignId,
      ]),
    outboxRowsOf: (campaignId: string) =>
      count(
        `select count(*)::int as n from outbox o join event e on e.position = o.event_position where e.stream_id = $1`,
        [campaignId],
      ),
    async close() {
      await t.drop();
      await server.close();
    },
  };
}

export type BillingMoneyFixture = Awaited<ReturnType<typeof billingMoneyFixture>>;

export async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}
