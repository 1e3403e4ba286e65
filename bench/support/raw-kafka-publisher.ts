/**
 * The Kafka benchmark's ceiling: the same messages (body size, key, headers with a message id each)
 * sent straight from memory with kafkajs, with the relay's producer settings (idempotent, acks -1, one
 * request in flight) and its batch size: one sendBatch per batch, one after the other, as the KafkaSink
 * sends one claimed batch per call. No database. Whatever the relay loses against this is the cost of
 * the outbox (claim, mark, serialization, pipelining).
 */
import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, type Message, Partitioners } from 'kafkajs';
import type { SampleMessage } from './seed.js';

export async function rawKafkaPublish(options: {
  brokers: string[];
  topic: string;
  messages: number;
  batchSize: number;
  sample: SampleMessage;
}): Promise<{ elapsedMs: number }> {
  const kafka = new Kafka({
    clientId: 'herald-bench-raw',
    brokers: options.brokers,
    logLevel: logLevel.ERROR,
  });
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  await producer.connect();
  // Ids, keys and headers are made up front (the relay reads them from rows, so making them is not
  // timed); each message gets its own headers object, as the relay's rows do.
  const createdAt = String(Date.now());
  const prepared = Array.from({ length: options.messages }, (_, i) => ({
    key: `bench-${i + 1}`,
    headers: {
      ...Object.fromEntries(Object.entries(options.sample.headers).map(([k, v]) => [k, String(v)])),
      'x-herald-stream-id': `bench-${i + 1}`,
      'x-correlation-id': randomUUID(),
      'x-herald-message-id': randomUUID(),
      'content-type': 'application/json',
    },
  }));
  const started = performance.now();
  for (let start = 0; start < options.messages; start += options.batchSize) {
    const batch: Message[] = [];
    for (let i = start; i < Math.min(options.messages, start + options.batchSize); i++) {
      // A fresh body per message, like the relay's Buffer.from(row payload).
      batch.push({
        key: prepared[i]!.key,
        value: Buffer.from(options.sample.payloadText, 'utf8'),
        headers: prepared[i]!.headers,
        timestamp: createdAt,
      });
    }
    await producer.sendBatch({ acks: -1, topicMessages: [{ topic: options.topic, messages: batch }] });
  }
  const elapsedMs = performance.now() - started;
  await producer.disconnect();
  return { elapsedMs };
}
