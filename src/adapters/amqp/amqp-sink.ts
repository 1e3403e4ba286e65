/**
 * RabbitMQ implementation of the relay's sink port (invariant 3: confirmed before sent): one connection and
 * one ConfirmChannel, opened lazily and again after a loss; every message is `persistent` and `mandatory`,
 * and `ok` only when the broker acked it and did not return it first. A nack, an unroutable message or a
 * channel closed by a soft error is `rejected`; no broker, a lost channel or no confirm in time is
 * `unavailable`. At most `inFlight` messages are unconfirmed, a full socket buffer waits for 'drain', and
 * concurrent calls write in call order, so messages leave in claim order. ADR 0004.
 */
import type { Channel, ConfirmChannel, Options } from 'amqplib';
import { errorMessage } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { HEADER } from '../../messaging/headers.js';
import type {
  MessageSink,
  OutboundMessage,
  PublishFailure,
  PublishOutcome,
  SinkConnectionState,
} from '../../ports/message-sink.js';
import { AmqpConnection } from './amqp-connection.js';

export interface AmqpSinkOptions {
  url: string;
  /** Connection name shown by the broker. */
  name?: string;
  /** Maximum unconfirmed messages (relay.inFlight). */
  inFlight: number;
  logger?: Logger;
  /** Bound on TCP connect + handshake. Default 5 s. */
  connectTimeoutMs?: number;
  /** A batch whose confirms take longer than this fails as `unavailable` and the channel is replaced. Default 15 s. */
  confirmTimeoutMs?: number;
  /** How long a positive exchange check is trusted. Default 60 s. */
  exchangeCheckTtlMs?: number;
}

/** AMQP reply codes that close only the channel and blame what was sent on it (404 is pre-checked). */
const SOFT_ERROR_CODES = new Set([403, 404, 405, 406]);

type Failure = { error: string; failure: PublishFailure };

/** One ConfirmChannel and what belongs to it: returns seen, unconfirmed count, waiters. */
class Session {
  readonly returns = new Map<string, string>();
  unconfirmed = 0;
  closed = false;
  /** Set when the channel (or its connection) went away; explains the failures of unconfirmed messages. */
  closeReason: Failure | undefined;
  /** The socket buffer is full: wait for 'drain' before writing more. */
  saturated = false;
  private waiters: (() => void)[] = [];

  constructor(
    readonly connection: AmqpConnection,
    readonly channel: ConfirmChannel,
  ) {}

  /** Resolves on the next confirm, drain or close. */
  nextEvent(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  notify(): void {
    if (this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  markClosed(reason: Failure): void {
    this.closeReason ??= reason;
    this.closed = true;
    this.notify();
  }
}

/** What a batch waits for: each published message's confirm callback settles one slot. */
interface BatchState {
  outcomes: (PublishOutcome | undefined)[];
  /** Slots whose confirm failed with the channel closing: classified once the close reason is known. */
  closedSlots: number[];
  /** 1 once a message's outcome is settled: confirms arriving after a timeout are ignored. */
  settled: Uint8Array;
  /** Messages written and not yet settled. */
  remaining: number;
  /** Set once the write phase is over; called when `remaining` reaches 0 after that. */
  done: (() => void) | undefined;
}

export class AmqpSink implements MessageSink {
  readonly kind = 'amqp' as const;
  private connection: AmqpConnection | undefined;
  private connectionLost = true;
  private current: Session | undefined;
  private opening: Promise<Session> | undefined;
  private writeTail: Promise<void> = Promise.resolve();
  private readonly knownExchanges = new Map<string, number>();
  private closed = false;
  private readonly connectTimeoutMs: number;
  private readonly confirmTimeoutMs: number;
  private readonly exchangeCheckTtlMs: number;
  private state: SinkConnectionState = 'idle';

  constructor(private readonly options: AmqpSinkOptions) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    this.confirmTimeoutMs = options.confirmTimeoutMs ?? 15_000;
    this.exchangeCheckTtlMs = options.exchangeCheckTtlMs ?? 60_000;
  }

  /** `lost` from a dropped connection (heartbeats notice one within seconds) until a new one opens. */
  get connectionState(): SinkConnectionState {
    return this.state;
  }

  async ensureConnected(): Promise<void> {
    if (!this.closed) await this.session();
  }

  async publish(batch: readonly OutboundMessage[]): Promise<PublishOutcome[]> {
    if (batch.length === 0) return [];
    if (this.closed) return batch.map((m) => failed(m.id, { error: 'sink closed', failure: 'unavailable' }));

    const state: BatchState = {
      outcomes: new Array(batch.length),
      settled: new Uint8Array(batch.length),
      closedSlots: [],
      remaining: 0,
      done: undefined,
    };
    let session: Session | undefined;
    // Writes are serialized so concurrent batches keep their order on the channel; confirms overlap.
    const written = this.writeTail.then(async () => {
      session = await this.write(batch, state);
    });
    this.writeTail = written.catch(() => {});
    try {
      await written;
    } catch (error) {
      this.fillUnsettled(batch, state, unavailable(error));
      return state.outcomes as PublishOutcome[];
    }
    if (state.remaining > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        state.done = resolve;
        timer = setTimeout(() => {
          this.options.logger?.warn({ unconfirmed: state.remaining }, 'publisher confirms timed out');
          const reason: Failure = { error: 'broker unavailable: confirm timeout', failure: 'unavailable' };
          this.fillUnsettled(batch, state, reason);
          this.discard(session, reason);
          resolve();
        }, this.confirmTimeoutMs);
      });
      clearTimeout(timer);
    }
    const reason = session?.closeReason ?? {
      error: 'broker unavailable: channel closed',
      failure: 'unavailable',
    };
    for (const index of state.closedSlots) {
      if (state.outcomes[index] === undefined) state.outcomes[index] = failed(batch[index]!.id, reason);
    }
    return state.outcomes as PublishOutcome[];
  }

  /** Writes the batch on the current session; returns that session (undefined: none could be opened). */
  private async write(batch: readonly OutboundMessage[], state: BatchState): Promise<Session | undefined> {
    let session: Session;
    try {
      session = await this.session();
    } catch (error) {
      this.fillUnsettled(batch, state, unavailable(error));
      return undefined;
    }
    const missing = await this.missingExchanges(session, batch);
    const window = Math.max(1, this.options.inFlight);

    for (let index = 0; index < batch.length; index++) {
      const message = batch[index]!;
      const absent = message.routingKey !== null ? missing.get(message.destination) : undefined;
      if (absent) {
        state.outcomes[index] = failed(message.id, { error: absent, failure: 'rejected' });
        continue;
      }
      while (!session.closed && (session.unconfirmed >= window || session.saturated))
        await session.nextEvent();
      if (session.closed) {
        state.outcomes[index] = failed(message.id, session.closeReason!);
        continue;
      }
      this.publishOne(session, message, index, state);
    }
    return session;
  }

  private publishOne(session: Session, message: OutboundMessage, index: number, state: BatchState): void {
    const exchange = message.routingKey === null ? '' : message.destination;
    const routingKey = message.routingKey ?? message.destination;
    session.unconfirmed++;
    state.remaining++;
    try {
      const writable = session.channel.publish(
        exchange,
        routingKey,
        message.body,
        properties(message),
        (error: unknown) => this.confirmed(session, state, message, index, error),
      );
      if (!writable) session.saturated = true;
    } catch (error) {
      // The confirm callback was queued before the write failed, so the channel's delivery tags no
      // longer line up: settle this message and replace the channel (its other messages fail over).
      const reason = session.closed
        ? session.closeReason!
        : ({ error: `publish failed: ${errorMessage(error)}`, failure: 'rejected' } satisfies Failure);
      this.settle(session, state, index, failed(message.id, reason));
      this.discard(session, { error: `broker unavailable: ${errorMessage(error)}`, failure: 'unavailable' });
    }
  }

  /** The broker's answer for one message (amqplib's confirm callback). */
  private confirmed(
    session: Session,
    state: BatchState,
    message: OutboundMessage,
    index: number,
    error: unknown,
  ): void {
    if (error === null || error === undefined) {
      const returned = session.returns.get(message.messageId);
      if (returned === undefined) {
        this.settle(session, state, index, { id: message.id, ok: true, brokerRef: null });
        return;
      }
      session.returns.delete(message.messageId);
      this.settle(session, state, index, failed(message.id, { error: returned, failure: 'rejected' }));
      return;
    }
    // amqplib reports a nack as this exact error; every other error means the channel went away.
    if (error instanceof Error && error.message === 'message nacked') {
      this.settle(
        session,
        state,
        index,
        failed(message.id, { error: 'nacked by broker', failure: 'rejected' }),
      );
      return;
    }
    this.settle(session, state, index, 'closed');
  }

  /** Settles one message exactly once (a confirm can still arrive after a timeout or a sync failure). */
  private settle(
    session: Session,
    state: BatchState,
    index: number,
    outcome: PublishOutcome | 'closed',
  ): void {
    if (state.settled[index] === 1) return;
    state.settled[index] = 1;
    session.unconfirmed--;
    if (outcome === 'closed') state.closedSlots.push(index);
    else if (state.outcomes[index] === undefined) state.outcomes[index] = outcome;
    session.notify();
    if (--state.remaining === 0) state.done?.();
  }

  /** Exchanges named by the batch that do not exist → reason. Default exchange and fresh checks are skipped. */
  private async missingExchanges(
    session: Session,
    batch: readonly OutboundMessage[],
  ): Promise<Map<string, string>> {
    const missing = new Map<string, string>();
    const now = Date.now();
    const toCheck = new Set<string>();
    for (const message of batch) {
      if (message.routingKey === null || message.destination === '') continue;
      if ((this.knownExchanges.get(message.destination) ?? 0) > now) continue;
      toCheck.add(message.destination);
    }
    for (const name of toCheck) {
      const reason = await this.checkExchange(session, name);
      if (reason) missing.set(name, reason);
      else this.knownExchanges.set(name, now + this.exchangeCheckTtlMs);
    }
    return missing;
  }

  /** Passive declare on a throwaway channel (a 404 closes it): null when the exchange exists. */
  private async checkExchange(session: Session, name: string): Promise<string | null> {
    let channel: Channel;
    try {
      channel = await session.connection.channel();
    } catch {
      return null; // cannot tell; publishing will surface the real problem
    }
    channel.on('error', () => {});
    try {
      await channel.checkExchange(name);
      return null;
    } catch (error) {
      return (error as { code?: unknown }).code === 404 ? `unroutable: exchange not found: ${name}` : null;
    } finally {
      try {
        await channel.close();
      } catch {
        // already closed by the broker's 404
      }
    }
  }

  private session(): Promise<Session> {
    if (this.current && !this.current.closed) return Promise.resolve(this.current);
    this.opening ??= this.open().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private async open(): Promise<Session> {
    if (!this.connection || this.connectionLost) {
      const previous = this.connection;
      this.connection = undefined;
      await previous?.close();
      let connection: AmqpConnection;
      try {
        connection = await AmqpConnection.connect({
          url: this.options.url,
          name: this.options.name ?? 'herald-relay',
          connectTimeoutMs: this.connectTimeoutMs,
          ...(this.options.logger ? { logger: this.options.logger } : {}),
        });
      } catch (error) {
        this.state = 'lost';
        throw error;
      }
      connection.onLost((error) => {
        if (this.connection !== connection) return;
        this.connectionLost = true;
        this.state = 'lost';
        this.options.logger?.warn({ err: error }, 'amqp sink lost its connection');
        const session = this.current;
        if (session && session.connection === connection) {
          // The channel closed first with a generic reason; the connection's is the useful one.
          const reason: Failure = { error: `broker unavailable: ${error.message}`, failure: 'unavailable' };
          if (session.closeReason?.failure !== 'rejected') session.closeReason = reason;
          session.markClosed(reason);
        }
      });
      this.connection = connection;
      this.connectionLost = false;
    }
    const connection = this.connection;
    let channel: ConfirmChannel;
    try {
      channel = await connection.confirmChannel();
    } catch (error) {
      this.connectionLost = true; // a connection that cannot open a channel is not worth keeping
      this.state = 'lost';
      throw error;
    }
    this.state = 'connected';
    const session = new Session(connection, channel);
    channel.on(
      'return',
      (returned: { fields: Record<string, unknown>; properties: { messageId?: unknown } }) => {
        const id = returned.properties.messageId;
        if (typeof id !== 'string') return;
        const { exchange, routingKey, replyText } = returned.fields;
        const where = exchange ? `${String(exchange)}/${String(routingKey)}` : String(routingKey);
        session.returns.set(id, `unroutable: ${where} (${String(replyText)})`);
      },
    );
    channel.on('drain', () => {
      session.saturated = false;
      session.notify();
    });
    channel.on('error', (error: Error & { code?: number }) => {
      const soft = typeof error.code === 'number' && SOFT_ERROR_CODES.has(error.code);
      this.options.logger?.warn({ err: error }, 'amqp sink channel error');
      session.closeReason ??= soft
        ? { error: `rejected by broker: ${error.message}`, failure: 'rejected' }
        : { error: `broker unavailable: ${error.message}`, failure: 'unavailable' };
    });
    channel.on('close', () => {
      session.markClosed({ error: 'broker unavailable: channel closed', failure: 'unavailable' });
    });
    this.current = session;
    return session;
  }

  /** Gives up on a session: its channel is closed and unconfirmed messages fail with `reason`. */
  private discard(session: Session | undefined, reason: Failure): void {
    if (!session || session.closed) return;
    session.markClosed(reason);
    session.channel.close().catch(() => {});
  }

  private fillUnsettled(batch: readonly OutboundMessage[], state: BatchState, reason: Failure): void {
    for (let index = 0; index < batch.length; index++) {
      if (state.outcomes[index] === undefined) state.outcomes[index] = failed(batch[index]!.id, reason);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.writeTail;
    const session = this.current;
    this.current = undefined;
    if (session && !session.closed) {
      try {
        await session.channel.close();
      } catch {
        // already closed
      }
    }
    await this.connection?.close();
    this.connection = undefined;
  }
}

function properties(message: OutboundMessage): Options.Publish {
  const correlationId = message.headers[HEADER.correlationId];
  return {
    persistent: true,
    mandatory: true,
    messageId: message.messageId,
    contentType: 'application/json',
    headers: message.headers,
    priority: 9 - Math.min(9, Math.max(0, message.priority)),
    timestamp: Math.floor((message.timestamp?.getTime() ?? Date.now()) / 1000),
    appId: 'herald',
    ...(typeof correlationId === 'string' ? { correlationId } : {}),
  };
}

function failed(id: number, reason: Failure): PublishOutcome {
  return { id, ok: false, error: reason.error, failure: reason.failure };
}

/** Every `unavailable` reason starts with "broker unavailable:", so `last_error` reads the same for all of them. */
function unavailable(error: unknown): Failure {
  return { error: `broker unavailable: ${errorMessage(error)}`, failure: 'unavailable' };
}
