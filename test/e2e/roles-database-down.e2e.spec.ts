/**
 * Every role starts (or keeps retrying visibly) and stops on SIGTERM whatever is down. A scanner or a
 * relay started while PostgreSQL is unreachable used to retry its LISTEN connection on a pg-listen
 * subscriber whose client cannot be reused, for ever, and to await it before its loop and before its
 * shutdown path: it never claimed anything and ignored SIGTERM. PostgreSQL is taken away from the
 * child process alone, through a TCP proxy (the shared server keeps serving other tests).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { heraldArgs } from '../support/cli.js';
import { TEST_LINE_CONTENT } from '../support/line.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';
import { TcpProxy } from '../support/tcp-proxy.js';

let t: TestDatabase;
let proxy: TcpProxy;
let child: ChildProcess | undefined;

beforeEach(async () => {
  t = await createTestDatabase();
  const target = new URL(t.url);
  proxy = await TcpProxy.reserve({ host: target.hostname, port: Number(target.port) });
});
afterEach(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
  await proxy.close();
  await t?.drop();
});

function herald(role: string, env: Record<string, string> = {}) {
  const process_ = spawn(process.execPath, heraldArgs([role]), {
    env: {
      ...process.env,
      DATABASE_URL: proxy.url(t.url),
      HERALD_SCHEMA: t.schema,
      HERALD_LOG_LEVEL: 'info',
      HERALD_SCANNER_POLL_MS: '200',
      HERALD_RELAY_IDLE_POLL_MS: '200',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  for (const stream of [process_.stdout, process_.stderr]) stream?.on('data', (chunk) => (output += chunk));
  child = process_;
  return { process: process_, output: () => output };
}

async function exitsOnSigterm(run: ReturnType<typeof herald>): Promise<void> {
  // The LISTEN connection is retried with a fresh client each time, never the failed one.
  expect(run.output()).not.toMatch(/cannot reuse a client/);
  const exited = once(run.process, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const started = Date.now();
  run.process.kill('SIGTERM');
  const timer = setTimeout(() => run.process.kill('SIGKILL'), 20_000);
  const [code, signal] = await exited;
  clearTimeout(timer);
  expect({ code, signal }, run.output()).toEqual({ code: 0, signal: null });
  expect(Date.now() - started).toBeLessThan(15_000);
}

const failedToConnect = (run: ReturnType<typeof herald>) =>
  waitFor(() => /ECONNREFUSED|database unavailable/.test(run.output()), {
    what: 'a logged connection failure',
    timeoutMs: 30_000,
  });

describe('roles with the database down', () => {
  it('a scanner started while PostgreSQL is down listens and claims once it is back, and stops on SIGTERM', async () => {
    // A minute's poll: only a wake-up (the LISTEN connection, once it is up) can make it claim in time.
    const run = herald('scanner', { AMQP_URL: '', HERALD_SCANNER_POLL_MS: '60000' });
    await failedToConnect(run);
    await proxy.open();
    const service = campaignService(t.db);
    const claimed = async (label: string) => {
      const c = await service.create(lineCampaign({ name: label, ...TEST_LINE_CONTENT }));
      await service.activate(c.campaignId);
      await waitFor(async () => (await service.get(c.campaignId)).status === 'DISPATCHING', {
        what: `the claim of "${label}" by the scanner that started without a database`,
        timeoutMs: 20_000,
      }).catch((error: Error) => {
        throw new Error(`${error.message}\n--- scanner output ---\n${run.output()}`);
      });
    };
    await claimed('first, found by the pass after the database came back');
    // Now the scanner sleeps on its minute's poll: the second claim in time proves it listens.
    await claimed('second, woken by NOTIFY');
    await exitsOnSigterm(run);
  });

  it('a scanner and a relay stop on SIGTERM while PostgreSQL is still down', async () => {
    const scanner = herald('scanner', { AMQP_URL: '' });
    await failedToConnect(scanner);
    await exitsOnSigterm(scanner);
    const relay = herald('relay', { AMQP_URL: requireEnv('AMQP_URL') });
    await failedToConnect(relay);
    await exitsOnSigterm(relay);
  });

  it('a relay started while PostgreSQL is down publishes once it is back', async () => {
    const run = herald('relay', { AMQP_URL: requireEnv('AMQP_URL') });
    await failedToConnect(run);
    await proxy.open();
    const service = campaignService(t.db);
    const c = await service.create(lineCampaign(TEST_LINE_CONTENT));
    await service.activate(c.campaignId);
    await service.sendNow(c.campaignId); // one outbox row
    await waitFor(
      async () =>
        (await t.db.query<{ n: number }>("select count(*)::int as n from outbox where status = 'sent'"))
          .rows[0]!.n === 1,
      { what: 'the row published by the relay that started without a database', timeoutMs: 30_000 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n--- relay output ---\n${run.output()}`);
    });
    await exitsOnSigterm(run);
  });

  it('a relay through a PostgreSQL outage: a few error lines, then one warn with the outage’s duration', async () => {
    await proxy.open();
    const run = herald('relay', { AMQP_URL: requireEnv('AMQP_URL') });
    await waitFor(() => run.output().includes('relay started'), {
      what: 'the relay started',
      timeoutMs: 30_000,
    });
    await proxy.close();
    const outageStarted = Date.now();
    await failedToConnect(run);
    // Six seconds down: at the relay's 200 ms poll and its backoff (≤ 5 s), several failed rounds.
    await waitFor(() => Date.now() - outageStarted >= 6_000, {
      what: 'six seconds of outage',
      intervalMs: 250,
    });
    const during = run.output();
    await proxy.open();
    const recovered = await waitFor(
      () =>
        run
          .output()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as { level: string; msg: string; outageMs?: number })
          .find((line) => /^relay recovered after/.test(line.msg)),
      { what: 'the relay’s recovery line', timeoutMs: 30_000 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n--- relay output ---\n${run.output()}`);
    });
    expect(recovered.level).toBe('warn');
    expect(recovered.outageMs).toBeGreaterThanOrEqual(3_000);
    // Not a stream of errors: the outage's first failure of each connection, not one per round.
    const errors = during.split('\n').filter((line) => line.includes('"level":"error"'));
    expect(errors.length, errors.join('\n')).toBeLessThanOrEqual(3);
    await exitsOnSigterm(run);
  });
});
