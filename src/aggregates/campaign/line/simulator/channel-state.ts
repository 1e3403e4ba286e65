/**
 * What the LINE simulator remembers per channel: its tokens, the retry keys it ACCEPTED (24 h on the
 * injected clock; a key answered 429/5xx is never recorded, so it may be used again), how often each
 * user received a message (accepted calls only: a 409 counts nobody again), the behaviours a test set,
 * and a per-endpoint one-second request window with the highest count seen. Memory stays bounded for a
 * million recipients: counts per user id, never request bodies; the request log is capped.
 */
import type { LineErrorDetail } from './contract.js';

export type LineEndpoint = 'broadcast' | 'multicast' | 'narrowcast' | 'quota' | 'quota-consumption';
export const LINE_ENDPOINTS: readonly LineEndpoint[] = [
  'broadcast',
  'multicast',
  'narrowcast',
  'quota',
  'quota-consumption',
];
/** Where a behaviour applies when it names no endpoints: the calls that send messages. */
export const SENDING_ENDPOINTS: readonly LineEndpoint[] = ['broadcast', 'multicast', 'narrowcast'];

/** LINE keeps a retry key for 24 hours. */
export const RETRY_KEY_WINDOW_MS = 24 * 60 * 60 * 1000;
export const MONTHLY_LIMIT_MESSAGE = 'You have reached your monthly limit.';
export const RATE_LIMIT_MESSAGE = 'The API rate limit has been exceeded. Try again later.';

export interface LineChannelOptions {
  channelId: string;
  /** Long-lived tokens that authenticate as this channel. */
  tokens?: readonly string[];
  /** Credentials for `POST /v2/oauth/accessToken` (client_credentials). */
  clientId?: string;
  clientSecret?: string;
  /** The channel's friends: a broadcast counts one receipt for each. */
  friends?: readonly string[];
  /** Audience groups (id → user ids): a narrowcast to one counts one receipt for each member. */
  audiences?: Readonly<Record<string, readonly string[]>>;
  /** Requests per second per endpoint; beyond it in a one-second window: 429 like LINE. */
  rateLimits?: Partial<Record<LineEndpoint, number>>;
  /** Messages per month (recipients of accepted calls); beyond it: 429 "monthly limit". */
  monthlyQuota?: number;
}

interface BehaviourScope {
  /** Applies to the next N matching calls, then ends. */
  calls?: number;
  /** Applies for this long from when it was set (injected clock). */
  forMs?: number;
  /** Endpoints it applies to; default: broadcast, multicast, narrowcast. */
  endpoints?: readonly LineEndpoint[];
}

/** A behaviour a test sets on a channel; without `calls` or `forMs` it lasts until cleared. */
export type LineBehaviour = BehaviourScope &
  (
    | { kind: 'throttle'; retryAfterSeconds?: number; message?: string }
    | { kind: 'server-error'; status?: number; message?: string }
    | { kind: 'reject'; status?: number; message?: string; details?: LineErrorDetail[] }
    | { kind: 'unauthorized' }
    | { kind: 'quota-exhausted' }
    /** Hold the response `ms` (absent: until the simulator closes); `beforeAccept`: hold before processing. */
    | { kind: 'stall'; ms?: number; beforeAccept?: boolean }
  );

/** One request the simulator answered (or is still holding), as the stats list it. */
export interface LineRequestRecord {
  channelId: string;
  endpoint: LineEndpoint;
  requestId: string;
  retryKey: string | null;
  /** 0 until answered. */
  status: number;
  /** The first request's id when answered 409. */
  acceptedRequestId: string | null;
  /** Receipts counted by this call (0 unless accepted). */
  recipients: number;
  receivedAt: number;
  respondedAt: number | null;
}

export interface LineViolation {
  at: number;
  channelId: string | null;
  endpoint: string;
  requestId: string;
  details: LineErrorDetail[];
}

interface ActiveBehaviour {
  behaviour: LineBehaviour;
  remaining: number;
  until: number;
  endpoints: ReadonlySet<LineEndpoint>;
}

interface RateWindow {
  second: number;
  count: number;
  max: number;
}

const MAX_REQUESTS_KEPT = 100_000;

export class ChannelState {
  options: LineChannelOptions;
  readonly receipts = new Map<string, number>();
  readonly retryKeys = new Map<string, { requestId: string; at: number }>();
  readonly requests: LineRequestRecord[] = [];
  requestsDropped = 0;
  accepted = 0;
  duplicates = 0;
  throttled = 0;
  recipientsDelivered = 0;
  broadcasts = 0;
  violations = 0;
  readonly narrowcastAudiences: number[] = [];
  private behaviours: ActiveBehaviour[] = [];
  private readonly windows = new Map<LineEndpoint, RateWindow>();
  /** Expired keys are swept when the map grows past this (amortized; a lookup also drops an expired key). */
  private pruneKeysAt = 10_000;

  constructor(options: LineChannelOptions) {
    this.options = options;
  }

  log(record: LineRequestRecord) {
    this.requests.push(record);
    if (this.requests.length > MAX_REQUESTS_KEPT) {
      const drop = this.requests.length - MAX_REQUESTS_KEPT / 2;
      this.requests.splice(0, drop);
      this.requestsDropped += drop;
    }
  }

  /** Counts a request in its endpoint's window; true when it goes beyond the channel's rate. */
  overRate(endpoint: LineEndpoint, now: number): boolean {
    const second = Math.floor(now / 1000);
    let window = this.windows.get(endpoint);
    if (!window) {
      window = { second, count: 0, max: 0 };
      this.windows.set(endpoint, window);
    }
    if (window.second !== second) {
      window.second = second;
      window.count = 0;
    }
    window.count += 1;
    window.max = Math.max(window.max, window.count);
    const limit = this.options.rateLimits?.[endpoint];
    return limit !== undefined && window.count > limit;
  }

  maxObservedRate(): Partial<Record<LineEndpoint, number>> {
    return Object.fromEntries([...this.windows].map(([endpoint, window]) => [endpoint, window.max]));
  }

  behave(behaviour: LineBehaviour, now: number) {
    this.behaviours.push({
      behaviour,
      remaining: behaviour.calls ?? Number.POSITIVE_INFINITY,
      until: behaviour.forMs === undefined ? Number.POSITIVE_INFINITY : now + behaviour.forMs,
      endpoints: new Set(behaviour.endpoints ?? SENDING_ENDPOINTS),
    });
  }

  clearBehaviours() {
    this.behaviours = [];
  }

  /** The first live behaviour for this endpoint, consuming one of its calls. */
  takeBehaviour(endpoint: LineEndpoint, now: number): LineBehaviour | null {
    this.behaviours = this.behaviours.filter((active) => active.remaining > 0 && active.until > now);
    const active = this.behaviours.find((candidate) => candidate.endpoints.has(endpoint));
    if (!active) return null;
    active.remaining -= 1;
    return active.behaviour;
  }

  /** The first accepted request of this key within 24 h, if any. */
  acceptedKey(key: string, now: number): string | null {
    const entry = this.retryKeys.get(key);
    if (!entry) return null;
    if (now - entry.at >= RETRY_KEY_WINDOW_MS) {
      this.retryKeys.delete(key);
      return null;
    }
    return entry.requestId;
  }

  recordKey(key: string, requestId: string, now: number) {
    if (this.retryKeys.size >= this.pruneKeysAt) {
      for (const [k, entry] of this.retryKeys) {
        if (now - entry.at >= RETRY_KEY_WINDOW_MS) this.retryKeys.delete(k);
      }
      this.pruneKeysAt = Math.max(10_000, this.retryKeys.size * 2);
    }
    this.retryKeys.set(key, { requestId, at: now });
  }

  receive(userIds: Iterable<string>): number {
    let count = 0;
    for (const userId of userIds) {
      this.receipts.set(userId, (this.receipts.get(userId) ?? 0) + 1);
      count += 1;
    }
    return count;
  }

  usage(): number {
    return this.recipientsDelivered;
  }

  reset() {
    this.receipts.clear();
    this.retryKeys.clear();
    this.pruneKeysAt = 10_000;
    this.requests.length = 0;
    this.narrowcastAudiences.length = 0;
    this.requestsDropped = 0;
    this.accepted = 0;
    this.duplicates = 0;
    this.throttled = 0;
    this.recipientsDelivered = 0;
    this.broadcasts = 0;
    this.violations = 0;
    this.behaviours = [];
    this.windows.clear();
  }
}
