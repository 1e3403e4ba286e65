/**
 * The dashboard's live updates (GET /v1/stream, Server-Sent Events). One hub per API process holds the
 * process's only LISTEN subscriptions (the change channels and the outbox channel) and maps notifications
 * to topics (each slice's, `outbox`, `overview`); each topic goes to every client at most once a second
 * (leading edge, one trailing event) and carries no data: the page refetches. A client whose socket cannot
 * keep up gets nothing until it drains, then one event per topic it missed, so a stalled tab never builds
 * a queue; a comment every 15 s keeps proxies open. Notifications only cut latency (invariant 7).
 * ADR 0018, ADR 0020.
 */
import type { ServerResponse } from 'node:http';
import type { Logger } from '../logger.js';
import { channels, type WakeupListener } from '../ports/wakeups.js';
import type { ApiRegistry } from './module.js';

/** A live-stream topic: a slice's (`campaigns`), `outbox`, or `overview` (anything changed). */
export type StreamTopic = string;

/** The topics every API serves, whatever is registered. */
const GENERIC_TOPICS = ['outbox', 'overview'] as const;

/** The registry's topics, in registry order, then the generic ones. */
export function streamTopics(registry: Pick<ApiRegistry, 'apiModules'>): readonly StreamTopic[] {
  const topics = registry.apiModules.flatMap((m) => Object.keys(m.topics ?? {}));
  return [...new Set([...topics, ...GENERIC_TOPICS])];
}

/** Which topic a stream type's changes concern (anything else only refreshes the overview). */
function topicOfStream(registry: Pick<ApiRegistry, 'apiModules'>): ReadonlyMap<string, StreamTopic> {
  const topics = new Map<string, StreamTopic>([['outbox', 'outbox']]);
  for (const module of registry.apiModules) {
    for (const [topic, streamTypes] of Object.entries(module.topics ?? {})) {
      for (const streamType of streamTypes) topics.set(streamType, topic);
    }
  }
  return topics;
}

export interface StreamHubSettings {
  /** At most one event per topic this often. */
  coalesceMs: number;
  heartbeatMs: number;
  /** Connections beyond this are refused (503), so a flood of tabs cannot exhaust the process. */
  maxClients: number;
}

export const DEFAULT_STREAM_SETTINGS: StreamHubSettings = {
  coalesceMs: 1_000,
  heartbeatMs: 15_000,
  maxClients: 1_000,
};

interface Client {
  res: ServerResponse;
  topics: ReadonlySet<StreamTopic>;
  /** Topics that fired while the socket was congested (sent once it drains). */
  missed: Set<StreamTopic> | null;
}

export class StreamHub {
  private readonly clients = new Set<Client>();
  private readonly lastSent = new Map<StreamTopic, number>();
  private readonly trailing = new Map<StreamTopic, NodeJS.Timeout>();
  private heartbeat: NodeJS.Timeout | undefined;
  private subscribed: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly deps: {
      listener: WakeupListener | undefined;
      schema: string;
      registry: Pick<ApiRegistry, 'apiModules' | 'stateModels'>;
      logger: Logger;
      settings?: Partial<StreamHubSettings>;
    },
  ) {}

  private get settings(): StreamHubSettings {
    return { ...DEFAULT_STREAM_SETTINGS, ...this.deps.settings };
  }

  /** For tests and metrics: connected clients, armed timers. */
  stats(): { clients: number; trailingTimers: number; heartbeat: boolean } {
    return { clients: this.clients.size, trailingTimers: this.trailing.size, heartbeat: !!this.heartbeat };
  }

  get full(): boolean {
    return this.clients.size >= this.settings.maxClients;
  }

  /** Subscribes the process's channels once (the first client); later clients share them. */
  private subscribe(): void {
    const { listener, schema, registry, logger } = this.deps;
    if (this.subscribed || !listener) return;
    const subscriptions: Promise<void>[] = [];
    const topicOf = topicOfStream(registry);
    const streamTypes = new Set([...registry.stateModels.keys(), ...topicOf.keys()]);
    for (const streamType of streamTypes) {
      const topic = topicOf.get(streamType) ?? 'overview';
      subscriptions.push(listener.subscribe(channels.changed(schema, streamType), () => this.notify(topic)));
    }
    subscriptions.push(listener.subscribe(channels.outbox(schema), () => this.notify('outbox')));
    this.subscribed = Promise.all(subscriptions).then(
      () => undefined,
      (error: unknown) =>
        logger.warn({ err: error }, 'live stream cannot listen; pages fall back to polling'),
    );
  }

  /** Resolves once the channels are listened to (tests). */
  async ready(): Promise<void> {
    this.subscribe();
    await this.subscribed;
  }

  private readonly changeListeners = new Set<() => void>();

  /** Called on every notification the hub hears (the overview's cache drops what it holds). */
  onChange(listener: () => void): void {
    this.changeListeners.add(listener);
  }

  /** A notification: the topic (and the overview) goes out now, or once its coalescing window ends. */
  notify(topic: StreamTopic): void {
    if (this.closed) return;
    for (const listener of this.changeListeners) listener();
    this.schedule(topic);
    if (topic !== 'overview') this.schedule('overview');
  }

  private schedule(topic: StreamTopic): void {
    if (this.clients.size === 0 || this.trailing.has(topic)) return;
    const wait = (this.lastSent.get(topic) ?? 0) + this.settings.coalesceMs - Date.now();
    if (wait <= 0) {
      this.broadcast(topic);
      return;
    }
    const timer = setTimeout(() => {
      this.trailing.delete(topic);
      this.broadcast(topic);
    }, wait);
    timer.unref();
    this.trailing.set(topic, timer);
  }

  private broadcast(topic: StreamTopic): void {
    this.lastSent.set(topic, Date.now());
    const frame = eventFrame(topic);
    for (const client of this.clients) {
      if (!client.topics.has(topic)) continue;
      if (client.missed) client.missed.add(topic);
      else this.write(client, frame);
    }
  }

  private write(client: Client, frame: string): void {
    if (client.res.writableEnded || client.res.destroyed) return;
    if (!client.res.write(frame)) client.missed ??= new Set();
  }

  /** Serves one client on a hijacked response until it disconnects or the hub closes. */
  attach(res: ServerResponse, topics: ReadonlySet<StreamTopic>): void {
    const client: Client = { res, topics, missed: null };
    this.clients.add(client);
    this.subscribe();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // The browser reconnects after 5 s when the stream drops; the first line flushes the headers.
    res.write('retry: 5000\n: connected\n\n');
    res.on('drain', () => {
      const missed = client.missed;
      client.missed = null;
      for (const topic of missed ?? []) this.write(client, eventFrame(topic));
    });
    const detach = () => {
      this.clients.delete(client);
      if (this.clients.size === 0) this.stopTimers();
    };
    res.on('close', detach);
    res.on('error', detach);
    this.heartbeat ??= setInterval(() => {
      for (const c of this.clients) if (!c.missed) this.write(c, ': heartbeat\n\n');
    }, this.settings.heartbeatMs);
    this.heartbeat.unref();
  }

  private stopTimers(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    for (const timer of this.trailing.values()) clearTimeout(timer);
    this.trailing.clear();
  }

  /** Ends every stream (the server is closing: in-flight requests must not include open streams). */
  close(): void {
    this.closed = true;
    this.stopTimers();
    for (const client of this.clients) client.res.end();
    this.clients.clear();
  }
}

function eventFrame(topic: StreamTopic): string {
  return `event: ${topic}\ndata: ${JSON.stringify({ at: new Date().toISOString() })}\n\n`;
}
