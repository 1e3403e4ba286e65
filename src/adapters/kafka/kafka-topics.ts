/**
 * Topic existence and creation through the kafkajs admin client, for the sink (is this destination
 * routable?) and the consumer (its topic, `<topic>.retry`, `<topic>.dead`). A topic that does not exist
 * makes a message unroutable (the Kafka counterpart of a missing RabbitMQ queue): it is rejected
 * before sending rather than left to kafkajs, which would retry metadata for it until its retries run
 * out. With `create` set, missing topics are created first (partitions and replication factor from
 * config, the broker's defaults otherwise) and this waits until they have leaders.
 *
 * Positive answers are cached for `ttlMs`; a negative answer is never cached (the topic may be
 * created at any moment).
 */
import type { Admin, Kafka } from 'kafkajs';
import { errorMessage } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { abortableDelay, type BackoffSettings, retryDelayMs } from '../../runtime/backoff.js';

export interface TopicCreation {
  partitions?: number | undefined;
  replicationFactor?: number | undefined;
}

export interface KafkaTopicAdminOptions {
  /** Create missing topics; absent: report them missing. */
  create?: TopicCreation | undefined;
  /** How long a "this topic exists" answer is trusted. Default 60 s. */
  ttlMs?: number;
  logger?: Logger | undefined;
}

const LEADER_WAIT_MS = 30_000;
const LEADER_WAIT: BackoffSettings = { baseMs: 50, maxMs: 1_000, jitter: 'equal' };

export class KafkaTopicAdmin {
  private admin: Admin | undefined;
  private connecting: Promise<Admin> | undefined;
  private readonly known = new Map<string, number>();
  private readonly ttlMs: number;

  constructor(
    private readonly kafka: Kafka,
    private readonly options: KafkaTopicAdminOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 60_000;
  }

  /**
   * The subset of `topics` that does not exist (after creating them, when configured to). Throws the
   * kafkajs error when the broker cannot be asked (the caller treats that as unavailable).
   */
  async missing(topics: Iterable<string>): Promise<Set<string>> {
    const now = Date.now();
    const unknown = new Set<string>();
    for (const topic of topics) if ((this.known.get(topic) ?? 0) <= now) unknown.add(topic);
    if (unknown.size === 0) return unknown;
    const admin = await this.connect();
    try {
      let absent = await this.absent(admin, unknown);
      if (absent.size > 0 && this.options.create) {
        await this.create(admin, [...absent]);
        absent = await this.absent(admin, absent);
      }
      return absent;
    } catch (error) {
      await this.reset();
      throw error;
    }
  }

  /** Forgets a topic (a send found it gone): the next `missing` asks the broker again. */
  forget(topic: string): void {
    this.known.delete(topic);
  }

  /** Creates topics that do not exist yet (whatever `create` says), with extra topic configs. */
  async ensure(
    topics: readonly string[],
    configEntries: { name: string; value: string }[] = [],
  ): Promise<void> {
    const admin = await this.connect();
    try {
      const absent = await this.absent(admin, new Set(topics));
      if (absent.size > 0) await this.create(admin, [...absent], configEntries);
    } catch (error) {
      await this.reset();
      throw error;
    }
  }

  async close(): Promise<void> {
    await this.reset();
  }

  private async absent(admin: Admin, topics: Set<string>): Promise<Set<string>> {
    const existing = new Set(await admin.listTopics());
    const expires = Date.now() + this.ttlMs;
    const absent = new Set<string>();
    for (const topic of topics) {
      if (existing.has(topic)) this.known.set(topic, expires);
      else absent.add(topic);
    }
    return absent;
  }

  private async create(
    admin: Admin,
    topics: string[],
    configEntries: { name: string; value: string }[] = [],
  ): Promise<void> {
    const create = this.options.create ?? {};
    await admin.createTopics({
      // kafkajs' own wait gives up ("does not host this topic-partition") while a busy broker's metadata
      // does not know the new topic yet; wait for the leaders below instead.
      waitForLeaders: false,
      topics: topics.map((topic) => ({
        topic,
        ...(create.partitions ? { numPartitions: create.partitions } : {}),
        ...(create.replicationFactor ? { replicationFactor: create.replicationFactor } : {}),
        ...(configEntries.length > 0 ? { configEntries } : {}),
      })),
    });
    await this.waitForLeaders(admin, topics);
    this.options.logger?.info({ topics, ...create }, 'kafka topics created');
  }

  /** Creation is asynchronous in KRaft: returns once every partition of `topics` has a leader (at most 30 s). */
  private async waitForLeaders(admin: Admin, topics: readonly string[]): Promise<void> {
    const deadline = Date.now() + LEADER_WAIT_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        const { topics: found } = await admin.fetchTopicMetadata({ topics: [...topics] });
        const ready =
          found.length === topics.length &&
          found.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0));
        if (ready) return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
      }
      if (Date.now() > deadline)
        throw new Error(`kafka topics ${topics.join(', ')} have no partition leaders yet`);
      await abortableDelay(retryDelayMs(attempt, LEADER_WAIT));
    }
  }

  private connect(): Promise<Admin> {
    if (this.admin) return Promise.resolve(this.admin);
    this.connecting ??= (async () => {
      const admin = this.kafka.admin();
      try {
        await admin.connect();
      } catch (error) {
        await admin.disconnect().catch(() => {});
        throw error;
      }
      this.admin = admin;
      return admin;
    })().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async reset(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    if (!admin) return;
    try {
      await admin.disconnect();
    } catch (error) {
      this.options.logger?.debug({ err: errorMessage(error) }, 'kafka admin disconnect failed');
    }
  }
}
