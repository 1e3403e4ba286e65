/**
 * RabbitMQ connection management for the relay and the consumers. `AmqpConnection.open()` retries
 * with capped exponential backoff until the broker answers; a lost connection is reported through
 * `onLost` and every holder re-opens on its own schedule, so a broker outage delays work and never
 * crashes a process (invariant 2). Driver errors become BrokerUnavailableError here.
 *
 * An amqps:// URL is verified against the CA in its `cacertfile` parameter (the system's CAs without
 * it) and the URL's host name, or `server_name_indication` when given; `certfile` and `keyfile` present
 * a client certificate (RabbitMQ's URI query parameters; loadConfig writes HERALD_AMQP_*_PATH into
 * them, ADR 0015). The files are read on every connect, so a reconnect picks up renewed ones.
 *
 * A cluster is given as several URLs separated by commas (AMQP_URL, ADR 0037): a connection goes to
 * the first node that answers, starting after the node whose connection was last lost, so a holder
 * re-opening after a node stops or hangs lands on a surviving node without waiting for the lost one.
 */
import type { ConnectionOptions } from 'node:tls';
import amqp, { type Channel, type ChannelModel, type ConfirmChannel, type Options } from 'amqplib';
import { BrokerUnavailableError, ConfigError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { abortableDelay, retryDelayMs } from '../../runtime/backoff.js';
import { readTlsFiles } from '../tls-files.js';

export type QueueType = 'quorum' | 'classic';
export type { Channel, ConfirmChannel };

export interface AmqpConnectionOptions {
  /** One URL, or the URLs of a cluster's nodes separated by commas. */
  url: string;
  name: string;
  logger?: Logger;
  heartbeatSeconds?: number;
  /** Bounds the TCP connect + AMQP handshake, so an unreachable or hung broker fails fast. Default 10 s. */
  connectTimeoutMs?: number;
}

/** Takes RabbitMQ's TLS URI parameters out of `url` and returns them as tls.connect options. */
export function amqpTlsOptions(url: URL): ConnectionOptions {
  const params = url.searchParams;
  const files = {
    caPath: params.get('cacertfile') ?? undefined,
    certPath: params.get('certfile') ?? undefined,
    keyPath: params.get('keyfile') ?? undefined,
  };
  const serverName = params.get('server_name_indication') ?? undefined;
  for (const name of ['cacertfile', 'certfile', 'keyfile', 'server_name_indication']) params.delete(name);
  if (url.protocol !== 'amqps:') return {};
  return { ...readTlsFiles(files, 'AMQP'), ...(serverName ? { servername: serverName } : {}) };
}

/** The URLs of `url`: one, or a cluster's nodes separated by commas. */
export function amqpUrls(url: string): string[] {
  return url
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
}

/** host:port of an AMQP URL, for logs and errors (never its credentials). */
export function amqpNode(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || (parsed.protocol === 'amqps:' ? '5671' : '5672')}`;
  } catch {
    return 'an invalid URL';
  }
}

/**
 * Per list of nodes (the `url` option as given), the index the next connection tries first: the
 * node after the one whose connection was lost last. Shared by every holder in the process (the
 * relay's sink, the consumers), which all move on together.
 */
const firstNodeToTry = new Map<string, number>();

export class AmqpConnection {
  private model: ChannelModel | undefined;
  /** Index in amqpUrls(url) of the node this connection is open to. */
  private node = 0;
  private lostHandlers = new Set<(error: Error) => void>();
  private closing = false;

  private constructor(private readonly options: AmqpConnectionOptions) {}

  /** Connects once; throws BrokerUnavailableError when the broker does not answer. */
  static async connect(options: AmqpConnectionOptions): Promise<AmqpConnection> {
    const connection = new AmqpConnection(options);
    await connection.open();
    return connection;
  }

  /** Connects, retrying with backoff until it works or `signal` aborts. */
  static async connectWithRetry(
    options: AmqpConnectionOptions,
    signal?: AbortSignal,
    maxDelayMs = 5_000,
  ): Promise<AmqpConnection> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await AmqpConnection.connect(options);
      } catch (error) {
        if (signal?.aborted) throw error;
        const delay = retryDelayMs(attempt + 1, { baseMs: 100, maxMs: maxDelayMs, jitter: 'equal' });
        options.logger?.warn({ err: error, attempt, delayMs: delay }, 'broker unavailable; retrying');
        await abortableDelay(delay, signal);
      }
    }
  }

  private async open(): Promise<void> {
    const urls = amqpUrls(this.options.url);
    const first = (firstNodeToTry.get(this.options.url) ?? 0) % urls.length;
    const failures: { node: string; error: unknown }[] = [];
    for (let step = 0; step < urls.length && !this.model; step++) {
      const index = (first + step) % urls.length;
      try {
        this.model = await this.connectTo(urls[index] as string);
        this.node = index;
      } catch (error) {
        if (error instanceof ConfigError) throw error; // an unreadable TLS file: no broker to blame
        failures.push({ node: amqpNode(urls[index] as string), error });
      }
    }
    if (!this.model) {
      const reasons = failures.map(({ node, error }) =>
        urls.length > 1 ? `${node}: ${(error as Error).message}` : (error as Error).message,
      );
      throw new BrokerUnavailableError(
        `cannot connect to RabbitMQ: ${reasons.join('; ')}`,
        failures[0]?.error,
      );
    }
    if (urls.length > 1) {
      firstNodeToTry.set(this.options.url, this.node);
      const log = failures.length > 0 ? this.options.logger?.warn : this.options.logger?.info;
      log?.call(
        this.options.logger,
        { node: amqpNode(urls[this.node] as string), unavailable: failures.map(({ node }) => node) },
        'amqp connected to a cluster node',
      );
    }
    const model = this.model;
    model.on('error', (error: Error) => this.options.logger?.warn({ err: error }, 'amqp connection error'));
    model.on('close', (error?: Error) => {
      if (this.closing) return;
      // The next connection of any holder starts at the next node (unless one moved on already).
      if (urls.length > 1 && firstNodeToTry.get(this.options.url) === this.node) {
        firstNodeToTry.set(this.options.url, (this.node + 1) % urls.length);
      }
      const reason = error ?? new Error('connection closed');
      for (const handler of this.lostHandlers) handler(reason);
    });
  }

  private async connectTo(node: string): Promise<ChannelModel> {
    const url = new URL(node);
    const tls = amqpTlsOptions(url);
    if (!url.searchParams.has('heartbeat'))
      url.searchParams.set('heartbeat', String(this.options.heartbeatSeconds ?? 10));
    return amqp.connect(url.toString(), {
      ...tls,
      clientProperties: { connection_name: this.options.name },
      timeout: this.options.connectTimeoutMs ?? 10_000,
    });
  }

  /** Called once when the connection drops unexpectedly (not after close()). */
  onLost(handler: (error: Error) => void): void {
    this.lostHandlers.add(handler);
  }

  async confirmChannel(): Promise<ConfirmChannel> {
    return this.wrap(() => this.requireModel().createConfirmChannel());
  }

  async channel(): Promise<Channel> {
    return this.wrap(() => this.requireModel().createChannel());
  }

  private requireModel(): ChannelModel {
    if (!this.model) throw new BrokerUnavailableError('amqp connection is not open');
    return this.model;
  }

  private async wrap<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw error instanceof BrokerUnavailableError
        ? error
        : new BrokerUnavailableError(`amqp: ${(error as Error).message}`, error);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    try {
      await this.model?.close();
    } catch {
      // already closed by the broker
    }
  }
}

/** Arguments for a durable queue of the configured type (quorum by default). */
export function queueOptions(
  type: QueueType,
  extra: Options.AssertQueue['arguments'] = {},
): Options.AssertQueue {
  return { durable: true, arguments: { 'x-queue-type': type, ...extra } };
}

/** Declares durable queues (idempotent). The relay publishes only to declared queues: anything else is unroutable. */
export async function declareQueues(
  channel: Channel,
  names: readonly string[],
  type: QueueType,
): Promise<void> {
  for (const name of names) await channel.assertQueue(name, queueOptions(type));
}
