/**
 * Cron executors end to end on real PostgreSQL and RabbitMQ, against real servers started here on
 * loopback: scanner → outbox → relay → cron_events → the fenced run executor → a node:http server or an
 * smtp-server. The fixed seed queue `cron_events` makes this a serial (e2e) file. Covers ping, webhook
 * (with its signature), the slack shape, email, a failure through 3 retries to permanently_failed
 * (HTTP and SMTP), a timeout, refused targets (literal and by DNS name: never sent, recorded), and a
 * message of unknown type dead-lettered while the consumer goes on.
 */
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import { webhookSignature } from '../../src/aggregates/cron/executors.js';
import type { CronService } from '../../src/aggregates/cron/service.js';
import { CRON_EVENTS_QUEUE } from '../../src/aggregates/cron/topology.js';
import type { ExistingJobRun } from '../../src/domain/job-run.js';
import { waitFor } from '../../src/testing/wait.js';
import {
  cronService,
  startHttpServer,
  startSmtpServer,
  type TestHttpServer,
  type TestSmtpServer,
} from '../support/cron.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let http: TestHttpServer;
let smtp: TestSmtpServer;
let connection: amqp.ChannelModel;
let channel: amqp.Channel;
let roles: RunningRoles | undefined;
let cron: CronService;

const fast = {
  HERALD_RELAY_IDLE_POLL_MS: '200',
  HERALD_CONSUMER_RETRY_DELAY_MS: '200',
  HERALD_SCANNER_POLL_MS: '200',
};

beforeAll(async () => {
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  channel = await connection.createChannel();
  channel.on('error', () => {});
  await declareQueues(channel, [CRON_EVENTS_QUEUE], 'quorum');
  http = await startHttpServer();
  smtp = await startSmtpServer();
});
afterAll(async () => {
  await http?.close();
  await smtp?.close();
  await connection?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
  await channel.purgeQueue(CRON_EVENTS_QUEUE);
  cron = cronService(t.db);
  smtp.mails.length = 0;
});
afterEach(async () => {
  await roles?.stop();
  roles = undefined;
  await t?.drop();
});

function start(overrides: Record<string, string> = {}) {
  roles = startRoles(
    t.config({
      ...fast,
      HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true',
      HERALD_SMTP_URL: smtp.url,
      HERALD_SMTP_FROM: 'herald@example.test',
      ...overrides,
    }),
    { relay: true, scanner: true, worker: true },
  );
}

/** A paused job (nothing fires on its own), run through "trigger now". */
async function job(name: string, jobType: string, payload: unknown, extra: Record<string, unknown> = {}) {
  return cron.create({
    organizationId: 'org-1',
    name,
    schedule: '0 0 1 1 *',
    timezone: 'UTC',
    jobType,
    payload,
    paused: true,
    retry: { maxRetries: 3, delayMs: 200, maxDelayMs: 400 },
    ...extra,
  });
}

async function finished(runId: string, timeoutMs = 20_000): Promise<ExistingJobRun> {
  return waitFor(
    async () => {
      const run = await cron.run(runId);
      return ['completed', 'failed', 'permanently_failed', 'cancelled'].includes(run.status) ? run : null;
    },
    { timeoutMs, what: `run ${runId} to finish` },
  );
}

describe('cron executors', () => {
  it('ping, webhook (signed), slack and email reach their servers and complete with status and output', async () => {
    start();
    http.respond('/webhook', { status: 201, body: 'created' });
    const ping = await job('ping', 'ping', { url: `${http.url}/ping` });
    const webhook = await job('webhook', 'webhook', {
      url: `${http.url}/webhook`,
      headers: { authorization: 'Bearer t0ken' },
      body: { hello: 'world', n: 1 },
      signingSecret: 'a-secret-of-16-chars',
    });
    const slack = await job('slack', 'slack', {
      webhookUrl: `${http.url}/slack`,
      text: 'deploy done',
      username: 'herald',
    });
    const email = await job('email', 'email', {
      to: ['ops@example.test'],
      subject: 'nightly report',
      text: 'all good',
    });
    const runs = await Promise.all([ping, webhook, slack, email].map((j) => cron.trigger(j.jobId, 'test')));
    const done = await Promise.all(runs.map((r) => finished(r.runId)));
    expect(done.map((r) => [r.status, r.fate, r.trigger, r.attempts])).toEqual(
      Array(4).fill(['completed', 'manual', 'manual', 1]),
    );
    expect(done.map((r) => r.responseStatus)).toEqual([200, 201, 200, 250]);
    expect(done[1]!.output).toBe('created');
    for (const r of done) {
      expect(r.startedAt).not.toBeNull();
      expect(r.durationMs).toBeGreaterThanOrEqual(0);
    }

    const [pinged] = http.to('/ping');
    expect(pinged!.method).toBe('GET');
    expect(pinged!.headers['x-herald-run-id']).toBe(runs[0]!.runId);
    const [hooked] = http.to('/webhook');
    expect(hooked!.method).toBe('POST');
    expect(JSON.parse(hooked!.body)).toEqual({ hello: 'world', n: 1 });
    expect(hooked!.headers.authorization).toBe('Bearer t0ken');
    expect(hooked!.headers['content-type']).toBe('application/json');
    expect(hooked!.headers['x-herald-signature']).toBe(
      webhookSignature('a-secret-of-16-chars', runs[1]!.runId, hooked!.body),
    );
    const [slacked] = http.to('/slack');
    expect(JSON.parse(slacked!.body)).toEqual({ text: 'deploy done', username: 'herald' });
    const [mail] = smtp.mails;
    expect(mail!.to).toEqual(['ops@example.test']);
    expect(mail!.from).toBe('herald@example.test');
    expect(mail!.raw).toContain('Subject: nightly report');
    expect(mail!.raw.toLowerCase()).toContain(`x-herald-run-id: ${runs[3]!.runId}`);
  });

  it('a failing job retries 3 times after a delay, then is permanently_failed, with status, output and error', async () => {
    start();
    http.respond('/down', { status: 503, body: 'maintenance' });
    const down = await job('down', 'ping', { url: `${http.url}/down` });
    smtp.rejectWith = 451;
    const mail = await job('mail', 'email', { to: 'a@example.test', subject: 's', text: 't' });
    try {
      const [httpRun, mailRun] = await Promise.all([
        cron.trigger(down.jobId, 'test'),
        cron.trigger(mail.jobId, 'test'),
      ]);
      const failed = await finished(httpRun.runId);
      expect(failed).toMatchObject({
        status: 'permanently_failed',
        attempts: 4,
        responseStatus: 503,
        output: 'maintenance',
        error: expect.stringContaining('HTTP 503'),
        claimEpoch: 4,
      });
      expect(http.to('/down')).toHaveLength(4);
      // Each retry waited its delay (200, 400, 400 ms): a delay, then a fresh claim — never a hot loop.
      const gaps = http
        .to('/down')
        .slice(1)
        .map((r, i) => r.at - http.to('/down')[i]!.at);
      for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(180);
      const events = (
        await t.db.query<{ type: string }>(
          `select type from event where stream_type = 'job_run' and stream_id = $1 order by version`,
          [httpRun.runId],
        )
      ).rows.map((r) => r.type);
      expect(events.filter((e) => e === 'JobRunAttemptFailed')).toHaveLength(3);
      expect(events.filter((e) => e === 'JobRunClaimed')).toHaveLength(3);
      expect(events.at(-1)).toBe('JobRunFailed');

      const mailFailed = await finished(mailRun.runId);
      expect(mailFailed).toMatchObject({ status: 'permanently_failed', attempts: 4, responseStatus: 451 });
      expect(smtp.mails).toHaveLength(0);
    } finally {
      smtp.rejectWith = undefined;
    }
  });

  it('a job slower than its timeout is aborted and recorded as timed out', async () => {
    start();
    http.respond('/slow', { delayMs: 3_000 });
    const slow = await job(
      'slow',
      'ping',
      { url: `${http.url}/slow` },
      { timeoutMs: 300, retry: { maxRetries: 0, delayMs: 200, maxDelayMs: 200 } },
    );
    const run = await finished((await cron.trigger(slow.jobId, 'test')).runId);
    expect(run.status).toBe('permanently_failed');
    expect(run.error).toMatch(/timed out after 300 ms/);
    expect(run.durationMs).toBeGreaterThanOrEqual(290);
    expect(run.durationMs).toBeLessThan(2_500);
  });

  it('targets that are private are refused (literal and by DNS name), recorded, and never sent', async () => {
    start({ HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'false' });
    const before = http.requests.length;
    const literal = await job('literal', 'webhook', { url: `${http.url}/internal`, body: { secret: 1 } });
    const byName = await job('by name', 'ping', { url: `http://localhost:${http.port}/internal` });
    const metadata = await job('metadata', 'ping', { url: 'http://169.254.169.254/latest/meta-data/' });
    const runs = await Promise.all([literal, byName, metadata].map((j) => cron.trigger(j.jobId, 'test')));
    const done = await Promise.all(runs.map((r) => finished(r.runId)));
    for (const run of done) {
      expect(run.status).toBe('failed'); // permanent: no retry can reach another address
      expect(run.attempts).toBe(1);
      expect(run.error).toMatch(/target refused/);
    }
    expect(done[0]!.error).toMatch(/127\.0\.0\.1 is a private, loopback/);
    expect(done[1]!.error).toMatch(/localhost resolves to/);
    expect(http.requests.length).toBe(before);
  });

  it('HERALD_CRON_EXECUTOR_CONCURRENCY bounds the runs one worker executes at once (the consumer prefetch)', async () => {
    const own = await startHttpServer();
    try {
      own.respond('/slow', { delayMs: 600 });
      start({ HERALD_CRON_EXECUTOR_CONCURRENCY: '2' });
      const jobs = await Promise.all(
        [1, 2, 3, 4, 5].map((i) => job(`slow ${i}`, 'ping', { url: `${own.url}/slow` })),
      );
      const runs = await Promise.all(jobs.map((j) => cron.trigger(j.jobId, 'test')));
      const done = await Promise.all(runs.map((r) => finished(r.runId)));
      expect(done.every((r) => r.status === 'completed')).toBe(true);
      expect(own.maxInFlight).toBe(2);
    } finally {
      await own.close();
    }
  });

  it('a message of unknown job type is dead-lettered and the consumer goes on', async () => {
    start();
    const ok = await job('still served', 'ping', { url: `${http.url}/after-poison` });
    await waitFor(async () => (await channel.checkQueue(CRON_EVENTS_QUEUE)).consumerCount > 0, {
      what: 'the executor to consume',
    });
    await channel.purgeQueue(`${CRON_EVENTS_QUEUE}.dead`).catch(() => {});
    const messageId = '0f3e7d8c-1b2a-4c5d-8e9f-0a1b2c3d4e5f';
    channel.sendToQueue(
      CRON_EVENTS_QUEUE,
      Buffer.from(
        JSON.stringify({
          runId: '1f3e7d8c-1b2a-4c5d-8e9f-0a1b2c3d4e5f',
          jobId: '2f3e7d8c-1b2a-4c5d-8e9f-0a1b2c3d4e5f',
          organizationId: 'org-1',
          jobType: 'fax',
          scheduledFor: new Date().toISOString(),
          epoch: 1,
          attempt: 1,
        }),
      ),
      { messageId, persistent: true, contentType: 'application/json' },
    );
    const inbox = await waitFor(
      async () =>
        (
          await t.db.query<{ status: string; error: string }>(
            `select status, error from inbox where consumer = 'cron-executor' and message_id = $1`,
            [messageId],
          )
        ).rows[0],
      { what: 'the poison message to be recorded' },
    );
    expect(inbox.status).toBe('dead');
    expect(inbox.error).toMatch(/unknown job type 'fax'/);
    const dead = await waitFor(
      async () => (await channel.get(`${CRON_EVENTS_QUEUE}.dead`, { noAck: true })) || null,
      {
        what: 'the dead-letter copy',
      },
    );
    expect(dead.properties.messageId).toBe(messageId);
    const run = await finished((await cron.trigger(ok.jobId, 'test')).runId);
    expect(run.status).toBe('completed');
  });
});
