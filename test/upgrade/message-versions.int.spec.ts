/**
 * Versioned wire messages (ADR 0039) through the real outbox, relay and RabbitMQ: an old consumer (it
 * reads message version 1 and knows `{ walletId, amount }`) and a new one (it reads version 2 through an
 * upcaster) beside producers of releases N, N+1 and N+2. The old consumer takes N+1's message with an
 * added field (additive: the field is ignored) and dead-letters N+2's version 2 naming the version; the
 * new consumer takes all three in the current shape; once the old consumer is upgraded, the
 * dead-lettered message shovelled back is processed — nothing is lost.
 */
import amqp, { type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { findInboxEntry } from '../../src/adapters/postgres/inbox-queries.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { HEADER } from '../../src/messaging/headers.js';
import type { MessageSchema } from '../../src/messaging/message-schemas.js';
import { waitFor } from '../../src/testing/wait.js';
import { type Consumer, consume } from '../../src/worker/consume.js';
import { RelayHarness } from '../outbox/support/relay-harness.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../support/services.js';
import { createWalletTable, type Release, walletAggregate, walletMessagesV2 } from './wallet-releases.js';

/** The old consumer's payload: version 1 (zod drops fields it does not know). */
const V1 = z.object({ walletId: z.string(), amount: z.number() });
/** The new consumer's payload: version 2. */
const V2 = z.object({ walletId: z.string(), amountMinor: z.number().int(), currency: z.string() });

let t: TestDatabase;
let broker: ChannelModel;
let relays: RelayHarness;
const consumers: Consumer[] = [];
const oldQueue = uniqueName('wallet_old');
const newQueue = uniqueName('wallet_new');
const seen: { consumer: string; messageId: string; payload: unknown }[] = [];

async function start(
  queue: string,
  consumer: string,
  parse: (p: unknown) => unknown,
  messages?: MessageSchema,
) {
  const started = await consume(
    { db: t.db, amqp: requireEnv('AMQP_URL'), logger: silentLogger },
    queue,
    async (message) => {
      seen.push({ consumer, messageId: message.messageId, payload: message.payload });
    },
    { consumer, parse, retryDelayMs: 100, maxAttempts: 2, ...(messages ? { messages } : {}) },
  );
  consumers.push(started);
  return started;
}

beforeAll(async () => {
  t = await createTestDatabase();
  await createWalletTable(t.db);
  broker = await amqp.connect(requireEnv('AMQP_URL'));
  relays = new RelayHarness(t);
});
afterAll(async () => {
  await Promise.all(consumers.map((c) => c.stop({ timeoutMs: 5_000 })));
  await relays?.close();
  const channel = await broker.createChannel();
  for (const queue of [oldQueue, newQueue]) {
    for (const name of [queue, `${queue}.retry.100`, `${queue}.dead`])
      await channel.deleteQueue(name).catch(() => {});
  }
  await broker.close();
  await t?.drop();
});

describe('an old consumer and a new producer', () => {
  it('coexist: additive fields ignored, an unknown major version dead-lettered with its reason, re-driven after the upgrade', async () => {
    const oldConsumer = await start(oldQueue, 'wallet-old', (p) => V1.parse(p));
    await start(newQueue, 'wallet-new', (p) => V2.parse(p), walletMessagesV2);
    const credit = async (release: Release, queue: string, id: string, amountMinor: number) => {
      const handler = new CommandHandler({ db: t.db }).for(walletAggregate(release, queue));
      await handler.handle(id, (now) => ({ type: 'Open', now }));
      await handler.handle(id, (now) => ({ type: 'Credit', amountMinor, now }));
    };
    for (const [release, amount] of [
      ['N', 100],
      ['N+1', 250],
      ['N+2', 399],
    ] as const) {
      await credit(release, oldQueue, `old-${release}`, amount);
      await credit(release, newQueue, `new-${release}`, amount);
    }
    const { rows: versions } = await t.db.query<{ destination: string; version: string }>(
      `select destination, headers->>'${HEADER.messageVersion}' as version from outbox order by id`,
    );
    expect(versions.map((r) => r.version)).toEqual(['1', '1', '1', '1', '2', '2']);

    const { relay } = relays.make();
    await relay.start();
    await waitFor(
      () =>
        seen.filter((s) => s.consumer === 'wallet-new').length === 3 &&
        oldConsumer.stats.deadLettered === 1 &&
        seen.length === 5,
      {
        what: 'three messages at the new consumer, two at the old one and one dead-lettered',
      },
    );
    const payloads = (consumer: string) =>
      seen
        .filter((s) => s.consumer === consumer)
        .map((s) => s.payload)
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    // The old consumer: N's message, and N+1's with its added `currency` dropped by its parse.
    expect(payloads('wallet-old')).toEqual([
      { walletId: 'old-N', amount: 1 },
      { walletId: 'old-N+1', amount: 2.5 },
    ]);
    // The new consumer: every version in its shape (N's and N+1's upcast from version 1).
    expect(payloads('wallet-new')).toEqual([
      { walletId: 'new-N', amountMinor: 100, currency: 'EUR' },
      { walletId: 'new-N+1', amountMinor: 250, currency: 'EUR' },
      { walletId: 'new-N+2', amountMinor: 399, currency: 'EUR' },
    ]);
    expect(oldConsumer.stats).toMatchObject({ rejected: 0, deadLettered: 1, processed: 2 });

    // The version-2 message waits in the dead-letter queue, saying why.
    const channel = await broker.createChannel();
    const dead = await waitFor(() => channel.get(`${oldQueue}.dead`, { noAck: true }), {
      what: 'the dead copy',
    });
    expect(String(dead.properties.headers?.[HEADER.error])).toContain(
      'message schema version 2 is newer than this consumer reads (up to 1)',
    );
    expect(JSON.parse(dead.content.toString())).toEqual({
      walletId: 'old-N+2',
      amountMinor: 399,
      currency: 'EUR',
    });

    // The old consumer is upgraded (same inbox name, now reading version 2); the operator re-drives.
    await oldConsumer.stop({ timeoutMs: 5_000 });
    const upgraded = await start(oldQueue, 'wallet-old', (p) => V2.parse(p), walletMessagesV2);
    channel.sendToQueue(oldQueue, dead.content, {
      persistent: true,
      messageId: dead.properties.messageId,
      headers: dead.properties.headers,
    });
    await waitFor(() => upgraded.stats.processed === 1, { what: 'the re-driven message processed' });
    await channel.close();
    expect(seen.at(-1)).toMatchObject({
      consumer: 'wallet-old',
      payload: { walletId: 'old-N+2', amountMinor: 399 },
    });
    expect(
      await findInboxEntry(t.db, { consumer: 'wallet-old', messageId: dead.properties.messageId }),
    ).toMatchObject({
      status: 'processed',
    });
  });
});
