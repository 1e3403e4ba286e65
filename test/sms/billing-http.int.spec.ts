/**
 * The HTTP billing client against the billing test server, over real HTTP on loopback: every retry
 * carries the operation's one key (body and Idempotency-Key header), so a 5xx, an answer held past the
 * timeout (applied or not) and an answer lost after applying all end charged once in the server's own
 * ledger; when every attempt fails the outcome is BillingUnavailableError; 402 and 409 are the service's
 * answers (never retried); a refused token is not retried; 429 honours Retry-After; mTLS with the right
 * certificate connects and a stranger's does not; and the client's logs (debug level, failures included)
 * never contain the bearer token.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { BillingSimulator } from '../../src/aggregates/campaign/sms/billing-simulator.js';
import { BillingUnavailableError, ConflictError, InsufficientBalanceError } from '../../src/errors.js';
import { waitFor } from '../../src/testing/wait.js';
import {
  startMtlsBillingServer,
  startTestBillingServer,
  TEST_BILLING_TOKEN,
  testBillingClient,
  testCertificates,
} from '../support/billing.js';

let server: BillingSimulator;
beforeAll(async () => {
  server = await startTestBillingServer();
});
afterAll(async () => server?.close());
afterEach(() => server.clearFaults());

let orgs = 0;
/** A fresh organization with a balance. */
function org(balance = '100'): string {
  const id = `org-http-${++orgs}`;
  server.credit(id, balance, 'top-up');
  return id;
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

const requestsFor = (key: string) => server.requests.filter((r) => r.key === key);

describe('retries reuse the key', () => {
  it('5xx twice, then the answer: one deduction, three requests with the same key and header', async () => {
    const o = org();
    const client = testBillingClient(server);
    server.inject({ kind: 'status', status: 503 }, { times: 2, key: 'campaign:r1' });
    const receipt = await client.deduct({ organizationId: o, key: 'campaign:r1', amount: '2' });
    expect(receipt).toMatchObject({ applied: true, amount: '2.0000', balanceAfter: '98.0000' });
    const seen = requestsFor('campaign:r1');
    expect(seen.map((r) => r.outcome)).toEqual(['fault:status-503', 'fault:status-503', 'applied']);
    expect(seen.every((r) => r.idempotencyKey === 'campaign:r1')).toBe(true);
    expect(new Set(seen.map((r) => r.requestId)).size).toBe(3);
    expect(server.entries(o).filter((e) => e.kind === 'deduction')).toHaveLength(1);
    await client.close();
  });

  it('an answer held past the timeout after applying: the retry gets the first result (applied: false)', async () => {
    const o = org();
    const client = testBillingClient(server, { timeoutMs: 200 });
    server.inject({ kind: 'hold', apply: true }, { key: 'campaign:held' });
    const receipt = await client.deduct({ organizationId: o, key: 'campaign:held', amount: '3' });
    expect(receipt).toMatchObject({ applied: false, amount: '3.0000', balanceAfter: '97.0000' });
    expect(requestsFor('campaign:held').map((r) => r.outcome)).toEqual(['fault:hold-after-201', 'repeat']);
    expect(server.balance(o)).toBe('97.0000');
    // The held request was abandoned by the client: the server sees its connection close.
    await waitFor(() => server.held() === 0, { what: 'the held request closed by the client' });
    await client.close();
  });

  it('an answer lost after applying (connection dropped): charged once', async () => {
    const o = org();
    const client = testBillingClient(server);
    server.inject({ kind: 'lose' }, { key: 'campaign:lost' });
    const receipt = await client.deduct({ organizationId: o, key: 'campaign:lost', amount: '1.5' });
    expect(receipt.applied).toBe(false);
    expect(requestsFor('campaign:lost').map((r) => r.outcome)).toEqual(['fault:lose-after-201', 'repeat']);
    expect(server.entries(o).filter((e) => e.key === 'campaign:lost')).toHaveLength(1);
    await client.close();
  });

  it('refunds and reversals are retried the same way', async () => {
    const o = org();
    const client = testBillingClient(server);
    await client.deduct({ organizationId: o, key: 'campaign:rv', amount: '4' });
    server.inject({ kind: 'lose' }, { operation: 'reversal' });
    server.inject({ kind: 'status', status: 500 }, { operation: 'refund' });
    expect(await client.reverse(o, 'campaign:rv', 'test')).toMatchObject({
      amount: '4.0000',
      applied: false,
    });
    expect(await client.refund({ organizationId: o, key: 'recipient:9:0', amount: '0.3' })).toMatchObject({
      applied: true,
    });
    expect(server.balance(o)).toBe('100.3000');
    await client.close();
  });

  it('429 waits for its Retry-After (bounded by the backoff cap) and retries', async () => {
    const o = org();
    const client = testBillingClient(server, { maxBackoffMs: 1_500 });
    server.inject({ kind: 'status', status: 429, retryAfterSeconds: 1 }, { key: 'campaign:429' });
    const started = Date.now();
    await client.deduct({ organizationId: o, key: 'campaign:429', amount: '1' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(requestsFor('campaign:429').map((r) => r.outcome)).toEqual(['fault:status-429', 'applied']);
    await client.close();
  });
});

describe('when every attempt fails', () => {
  it('5xx each time: BillingUnavailableError naming the key and the reason; nothing charged', async () => {
    const o = org();
    const client = testBillingClient(server);
    server.inject({ kind: 'status', status: 502 }, { times: 3, key: 'campaign:down' });
    const error = await errorOf(client.deduct({ organizationId: o, key: 'campaign:down', amount: '1' }));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    expect((error as BillingUnavailableError).details).toMatchObject({
      key: 'campaign:down',
      operation: 'deduction',
      reason: 'server-error',
      status: 502,
      permanent: false,
    });
    expect(requestsFor('campaign:down')).toHaveLength(3);
    expect(server.balance(o)).toBe('100.0000');
    await client.close();
  });

  it('timeouts each time (held, applied on the first): unavailable; a later call with the key is charged once', async () => {
    const o = org();
    const client = testBillingClient(server, { timeoutMs: 150, attempts: 2 });
    server.inject({ kind: 'hold', apply: true }, { key: 'campaign:slow' });
    server.inject({ kind: 'hold', apply: false }, { key: 'campaign:slow' });
    const error = await errorOf(client.deduct({ organizationId: o, key: 'campaign:slow', amount: '5' }));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    expect((error as BillingUnavailableError).details).toMatchObject({ reason: 'timeout' });
    // Billing applied it: the caller's retry with the same key answers the first result.
    expect(await client.deduct({ organizationId: o, key: 'campaign:slow', amount: '5' })).toMatchObject({
      applied: false,
      balanceAfter: '95.0000',
    });
    expect(server.entries(o).filter((e) => e.kind === 'deduction')).toHaveLength(1);
    await client.close();
  });

  it('nothing listening: a connection error, unavailable', async () => {
    const client = testBillingClient({ url: 'http://127.0.0.1:9' }, { attempts: 2 });
    const error = await errorOf(client.deduct({ organizationId: 'o', key: 'campaign:nowhere', amount: '1' }));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    expect((error as BillingUnavailableError).details).toMatchObject({ reason: 'connection' });
    await client.close();
  });
});

describe("the service's answers", () => {
  it('402: InsufficientBalanceError with the balance, not retried, nothing charged', async () => {
    const o = org('1');
    const client = testBillingClient(server);
    const error = await errorOf(client.deduct({ organizationId: o, key: 'campaign:poor', amount: '2' }));
    expect(error).toBeInstanceOf(InsufficientBalanceError);
    expect((error as InsufficientBalanceError).details).toMatchObject({
      balance: '1.0000',
      amount: '2.0000',
    });
    expect(requestsFor('campaign:poor')).toHaveLength(1);
    await client.close();
  });

  it('409: a deduction under a reversed key is a ConflictError, not retried', async () => {
    const o = org();
    const client = testBillingClient(server);
    await client.reverse(o, 'campaign:gone', 'gave up');
    expect(
      await errorOf(client.deduct({ organizationId: o, key: 'campaign:gone', amount: '1' })),
    ).toBeInstanceOf(ConflictError);
    expect(requestsFor('campaign:gone').filter((r) => r.operation === 'deduction')).toHaveLength(1);
    await client.close();
  });

  it('a wrong token: 401, not retried (another attempt cannot help), unavailable and permanent', async () => {
    const client = testBillingClient(server, { bearerToken: 'not-the-token-at-all' });
    const error = await errorOf(client.deduct({ organizationId: org(), key: 'campaign:401', amount: '1' }));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    expect((error as BillingUnavailableError).details).toMatchObject({ status: 401, permanent: true });
    expect(server.requests.filter((r) => r.outcome === 'unauthorized').length).toBeGreaterThanOrEqual(1);
    await client.close();
  });
});

describe('mTLS', () => {
  let tlsServer: BillingSimulator;
  beforeAll(async () => {
    tlsServer = await startMtlsBillingServer();
    tlsServer.credit('org-tls', '10', 'top-up');
  });
  afterAll(async () => tlsServer?.close());

  it('the certificate the CA issued connects; without one, or with a stranger’s, nothing is reached', async () => {
    const c = testCertificates();
    const good = testBillingClient(tlsServer, {
      bearerToken: undefined,
      tls: { caPath: c.caPath, certPath: c.client.certPath, keyPath: c.client.keyPath },
    });
    expect(await good.deduct({ organizationId: 'org-tls', key: 'campaign:tls', amount: '1' })).toMatchObject({
      applied: true,
    });
    for (const tls of [
      { caPath: c.caPath },
      { caPath: c.caPath, certPath: c.strangerClient.certPath, keyPath: c.strangerClient.keyPath },
    ]) {
      const bad = testBillingClient(tlsServer, { bearerToken: undefined, tls, attempts: 1 });
      const error = await errorOf(
        bad.deduct({ organizationId: 'org-tls', key: 'campaign:tls-2', amount: '1' }),
      );
      expect(error).toBeInstanceOf(BillingUnavailableError);
      await bad.close();
    }
    // A server certificate the client does not trust (the system's CAs) is refused too.
    const untrusting = testBillingClient(tlsServer, {
      bearerToken: undefined,
      tls: { certPath: c.client.certPath, keyPath: c.client.keyPath },
      attempts: 1,
    });
    expect(
      await errorOf(untrusting.deduct({ organizationId: 'org-tls', key: 'campaign:tls-3', amount: '1' })),
    ).toBeInstanceOf(BillingUnavailableError);
    expect(tlsServer.entries('org-tls').filter((e) => e.kind === 'deduction')).toHaveLength(1);
    await untrusting.close();
    await good.close();
  });
});

it('logs carry the key, the attempt and the correlation id, never the bearer token', async () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = pino({ level: 'debug' }, sink);
  const o = org();
  const client = testBillingClient(server, { logger });
  server.inject({ kind: 'status', status: 503 }, { key: 'campaign:logged' });
  await client.deduct(
    { organizationId: o, key: 'campaign:logged', amount: '1' },
    { correlationId: 'req-42' },
  );
  server.inject({ kind: 'status', status: 500 }, { times: 3, key: 'campaign:logged-2' });
  await errorOf(client.deduct({ organizationId: o, key: 'campaign:logged-2', amount: '1' }));
  const wrong = testBillingClient(server, { logger, bearerToken: `${TEST_BILLING_TOKEN}-wrong` });
  await errorOf(wrong.deduct({ organizationId: o, key: 'campaign:logged-3', amount: '1' }));
  const text = lines.join('');
  expect(text).toContain('campaign:logged');
  expect(text).toContain('"correlationId":"req-42"');
  expect(text).toContain('"attempt":2');
  expect(text).not.toContain(TEST_BILLING_TOKEN);
  expect(text).not.toMatch(/Bearer \S/);
  await client.close();
  await wrong.close();
});
