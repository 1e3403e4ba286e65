/**
 * The dashboard's live updates (GET /v1/stream, Server-Sent Events). One hub per API process holds the
 * process's only LISTEN subscriptions (the change channels: each stream type's and the outbox's) and
 * maps notifications to topics (each slice's, `outbox`, `overview`). A change notification names the
 * organizations it concerns (its payload), and each goes only to those organizations' clients: one
 * organization never learns when another changed anything. Each (organization, topic) goes to its
 * clients at most once a second (leading edge, one trailing event) and carries no data: the page
 * refetches. After the LISTEN connection (re)connects (notifications may have been lost) every client
 * gets every topic once. A client whose socket cannot keep up gets nothing until it drains, then one
 * event per topic it missed, so a stalled tab never builds a queue; a comment every 15 s keeps proxies
 * open. Streams are bounded per process, per organization and per API key. Notifications only cut
 * latency (invariant 7). ADR 0018, ADR 0020, ADR 0028.
 */
import type { ServerResponse } from 'node:http';
import { LimitError } from '../errors.js';
import type { Logger } from '../logger.js';
import { channels, organizationsOf, type WakeupListener } from '../ports/wakeups.js';
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
  /** At most one event per organization and topic this often. */
  coalesceMs: number;
  heartbeatMs: number;
  /** Connections beyond this are refused (503), so a flood of tabs cannot exhaust the process. */
  maxClients: number;
  /** One organization's connections beyond this are refused (429): no organization takes every slot. */
  perOrganization: number;
  /** One API key's connections (its sessions' included) beyond this are refused (429). */
  perKey: number;
}

export const DEFAULT_STREAM_SETTINGS: StreamHubSettings = {
  coalesceMs: 1_000,
  heartbeatMs: 15_000,
  maxClients: 1_000,
  perOrganization: 100,
  perKey: 20,
};

/** Whose stream it is: the limits count per organization and per key, and events go by organization. */
export interface StreamOwner {
  organizationId: string;
  keyId: string;
}

interface Client {
  res: ServerResponse;
  owner: StreamOwner;
  topics: ReadonlySet<StreamTopic>;
  /** Topics that fired while the socket was congested (sent once it drains). */
  missed: Set<StreamTopic> | null;
}

/** The coalescing key of an organization's topic (a NUL cannot occur in either). */
const windowKey = (organizationId: string, topic: StreamTopic) => `${organizationId}\u0000${topic}`;

export class StreamHub {
  private readonly clients = new Set<Client>();
  /** Open clients per organization and per key (the limits; an organization's events go to its set). */
  private readonly byOrganization = new Map<string, Set<Client>>();
  private readonly perKey = new Map<string, number>();
  /** Per (organization, topic): when its last event went out, and its trailing event's timer. */
  private readonly lastSent = new Map<string, number>();
  private readonly trailing = new Map<string, NodeJS.Timeout>();
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

  /**
   * Throws LimitError when `owner` may not open another stream: the process is full (OVERLOADED, 503),
   * or its organization or key holds its share already (LIMIT_REACHED, 429). Each names its setting.
   */
  admit(owner: StreamOwner): void {
    const { maxClients, perOrganization, perKey } = this.settings;
    if ((this.byOrganization.get(owner.organizationId)?.size ?? 0) >= perOrganization) {
      throw new LimitError(
        'LIMIT_REACHED',
        `your organization has ${perOrganization} live streams open on this API process, its limit (HERALD_API_STREAMS_PER_ORGANIZATION); close a page or poll`,
        { limit: 'HERALD_API_STREAMS_PER_ORGANIZATION', max: perOrganization },
      );
    }
    if ((this.perKey.get(owner.keyId) ?? 0) >= perKey) {
      throw new LimitError(
        'LIMIT_REACHED',
        `this API key has ${perKey} live streams open on this API process, its limit (HERALD_API_STREAMS_PER_KEY); close a page or poll`,
        { limit: 'HERALD_API_STREAMS_PER_KEY', max: perKey },
      );
    }
    if (this.clients.size >= maxClients) {
      throw new LimitError(
        'OVERLOADED',
        `this API process serves ${maxClients} live streams, its limit (HERALD_API_STREAMS_MAX); poll, or retry later`,
        { limit: 'HERALD_API_STREAMS_MAX', max: maxClients },
      );
    }
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
      subscriptions.push(
        listener.subscribe(channels.changed(schema, streamType), (payload) =>
          this.notify(topic, payload === undefined ? 'everyone' : organizationsOf(payload)),
        ),
      );
    }
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

  /**
   * A notification: the topic (and the overview) goes to the organizations it names now, or once their
   * coalescing window ends. `everyone`: the LISTEN connection (re)connected and may have missed some.
   */
  notify(topic: StreamTopic, organizations: readonly string[] | 'everyone'): void {
    if (this.closed) return;
    for (const listener of this.changeListeners) listener();
    const targets = organizations === 'everyone' ? [...this.byOrganization.keys()] : organizations;
    for (const organizationId of targets) {
      if (!this.byOrganization.has(organizationId)) continue;
      this.schedule(organizationId, topic);
      if (topic !== 'overview') this.schedule(organizationId, 'overview');
    }
  }

  private schedule(organizationId: string, topic: StreamTopic): void {
    const key = windowKey(organizationId, topic);
    if (this.trailing.has(key)) return;
    const wait = (this.lastSent.get(key) ?? 0) + this.settings.coalesceMs - Date.now();
    if (wait <= 0) {
      this.broadcast(organizationId, topic);
      return;
    }
    const timer = setTimeout(() => {
      this.trailing.delete(key);
      this.broadcast(organizationId, topic);
    }, wait);
    timer.unref();
    this.trailing.set(key, timer);
  }

  private broadcast(organizationId: string, topic: StreamTopic): void {
    const key = windowKey(organizationId, topic);
    const clients = this.byOrganization.get(organizationId);
    if (!clients) {
      this.lastSent.delete(key);
      return;
    }
    this.lastSent.set(key, Date.now());
    const frame = eventFrame(topic);
    for (const client of clients) {
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
  attach(res: ServerResponse, owner: StreamOwner, topics: ReadonlySet<StreamTopic>): void {
    const client: Client = { res, owner, topics, missed: null };
    this.clients.add(client);
    const organization = this.byOrganization.get(owner.organizationId) ?? new Set<Client>();
    organization.add(client);
    this.byOrganization.set(owner.organizationId, organization);
    this.perKey.set(owner.keyId, (this.perKey.get(owner.keyId) ?? 0) + 1);
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
      if (!this.clients.delete(client)) return; // 'close' after 'error'
      this.release(client);
      if (this.clients.size === 0) this.stopTimers();
    };
    res.on('close', detach);
    res.on('error', detach);
    this.heartbeat ??= setInterval(() => {
      for (const c of this.clients) if (!c.missed) this.write(c, ': heartbeat\n\n');
    }, this.settings.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Frees a client's slots; an organization without clients keeps no timers or windows. */
  private release(client: Client): void {
    const { organizationId, keyId } = client.owner;
    const organization = this.byOrganization.get(organizationId);
    organization?.delete(client);
    if (organization?.size === 0) {
      this.byOrganization.delete(organizationId);
      for (const [key, timer] of this.trailing) {
        if (key.startsWith(`${organizationId}\u0000`)) {
          clearTimeout(timer);
          this.trailing.delete(key);
        }
      }
      for (const key of this.lastSent.keys()) {
        if (key.startsWith(`${organizationId}\u0000`)) this.lastSent.delete(key);
      }
    }
    const keys = (this.perKey.get(keyId) ?? 1) - 1;
    if (keys > 0) this.perKey.set(keyId, keys);
    else this.perKey.delete(keyId);
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
    this.byOrganization.clear();
    this.perKey.clear();
  }
}

function eventFrame(topic: StreamTopic): string {
  return `event: ${topic}\ndata: ${JSON.stringify({ at: new Date().toISOString() })}\n\n`;
}
