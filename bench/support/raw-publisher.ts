/**
 * The benchmark's ceiling: the same messages (size, headers, properties) published straight from
 * memory with amqplib on one confirm channel with the relay's in-flight window. No database. Whatever
 * the relay loses against this is the cost of the outbox (claim, mark, serialization, pipelining).
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import type { SampleMessage } from './seed.js';

export async function rawPublish(options: {
  url: string;
  queue: string;
  messages: number;
  inFlight: number;
  sample: SampleMessage;
}): Promise<{ elapsedMs: number; nacked: number }> {
  const model = await amqp.connect(options.url);
  const channel = await model.createConfirmChannel();
  // Ids and headers are made up front (the relay reads them from rows, so making them is not timed).
  // Each message gets its own headers object with its own stream and correlation ids, as the relay's
  // rows do: encoding one shared, cache-hot object 100,000 times would flatter the ceiling.
  const ids = Array.from({ length: options.messages }, () => randomUUID());
  const headers = Array.from({ length: options.messages }, (_, i) => ({
    ...options.sample.headers,
    'x-herald-stream-id': `bench-${i + 1}`,
    'x-correlation-id': randomUUID(),
  }));
  let unconfirmed = 0;
  let nacked = 0;
  let confirmed = 0;
  let wake: (() => void) | undefined;
  const notify = () => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  let saturated = false;
  channel.on('drain', () => {
    saturated = false;
    notify();
  });
  let allConfirmed!: () => void;
  const done = new Promise<void>((resolve) => {
    allConfirmed = resolve;
  });
  const onConfirm = (error: unknown) => {
    unconfirmed--;
    if (error) nacked++;
    if (++confirmed === options.messages) allConfirmed();
    notify();
  };

  const started = performance.now();
  for (let i = 0; i < options.messages; i++) {
    while (unconfirmed >= options.inFlight || saturated) {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
    unconfirmed++;
    // A fresh body per message, like the relay's Buffer.from(row payload).
    const body = Buffer.from(options.sample.payloadText, 'utf8');
    const ok = channel.publish(
      '',
      options.queue,
      body,
      {
        persistent: true,
        mandatory: true,
        messageId: ids[i],
        contentType: 'application/json',
        headers: headers[i],
        priority: 6,
        timestamp: Math.floor(Date.now() / 1000),
        appId: 'herald',
      },
      onConfirm,
    );
    if (!ok) saturated = true;
  }
  await done;
  const elapsedMs = performance.now() - started;
  await channel.close();
  await model.close();
  return { elapsedMs, nacked };
}
