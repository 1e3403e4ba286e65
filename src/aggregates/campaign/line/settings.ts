/**
 * The LINE channel's settings (ADR 0021): where the Messaging API is, how long a call may take, the
 * per-channel rate limits (defaults: LINE's documented limits), how many deliveries a worker runs at once
 * (each holds its inbox transaction and records chunks on a second connection, so the pool must fit
 * both), and the AES-256-GCM keys channel secrets are sealed with (a key ring: the current key seals,
 * old keys still open until `herald line-channels rotate-key` re-seals every row).
 */
import { createHash, createSecretKey, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { ConfigError } from '../../../errors.js';
import { describeSetting as d, defineSettings, type SettingsOf } from '../../../settings/fragment.js';
import { positiveInt, url } from '../../../settings/validators.js';

export interface LineRateLimits {
  /** Multicast calls per second per channel (LINE: 200). */
  readonly multicastPerSecond: number;
  /** Broadcast calls per hour per channel (LINE: 60). */
  readonly broadcastPerHour: number;
  /** Narrowcast calls per hour per channel (LINE: 60). */
  readonly narrowcastPerHour: number;
}

export interface LineKeyRing {
  readonly current: { readonly id: string; readonly key: KeyObject };
  /** Every key that opens a sealed value, by id (the current one included). */
  readonly keys: ReadonlyMap<string, KeyObject>;
  /** True when no key was configured and the development key seals (a warning at start-up). */
  readonly development: boolean;
}

export interface LineSettings {
  readonly apiBaseUrl: string;
  readonly requestTimeoutMs: number;
  readonly rateLimits: LineRateLimits;
  /** Deliveries one worker runs at once per LINE queue (the consumers' prefetch). */
  readonly deliveryConcurrency: number;
  /** A 429's wait longer than this gives the message back to the retry queue instead of waiting in place. */
  readonly maxThrottleWaitMs: number;
  /** A short-lived channel token is re-issued this long before it expires. */
  readonly tokenRefreshMarginMs: number;
  readonly keyRing: LineKeyRing;
}

const keyId = z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1..32 of [A-Za-z0-9_-]');
const base64Key = z
  .string()
  .trim()
  .refine((value) => Buffer.from(value, 'base64').length === 32, 'must be 32 bytes, base64-encoded');

/** `id:base64key[,id:base64key…]`: keys retired by a rotation that still open older rows. */
const oldKeys = z
  .string()
  .trim()
  .regex(
    /^[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/=]+(,[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/=]+)*$/,
    'must be id:base64[,id:base64…]',
  )
  .refine(
    (value) => value.split(',').every((pair) => Buffer.from(pair.split(':')[1]!, 'base64').length === 32),
    'every key must be 32 bytes, base64-encoded',
  );

/** The key that seals when none is configured: fine for the demo and tests, never for production. */
const DEVELOPMENT_KEY = createHash('sha256').update('herald development LINE credentials key').digest();

export const lineSettings = defineSettings({
  key: 'line',
  title: 'LINE delivery',
  env: {
    HERALD_LINE_API_BASE_URL: d(
      url(['https', 'http']).default('https://api.line.me'),
      'the LINE Messaging API (and channel token) base URL; tests and staging point it at `herald line-simulator`',
    ),
    HERALD_LINE_REQUEST_TIMEOUT_MS: d(positiveInt.max(120_000).default(10_000), 'one LINE call’s timeout'),
    HERALD_LINE_MULTICAST_PER_SECOND: d(
      positiveInt.max(100_000).default(200),
      'multicast calls per second per channel, shared by a worker’s deliveries (LINE’s documented limit: 200)',
    ),
    HERALD_LINE_BROADCAST_PER_HOUR: d(
      positiveInt.max(1_000_000).default(60),
      'broadcast calls per hour per channel (LINE: 60)',
    ),
    HERALD_LINE_NARROWCAST_PER_HOUR: d(
      positiveInt.max(1_000_000).default(60),
      'narrowcast calls per hour per channel (LINE: 60)',
    ),
    HERALD_LINE_DELIVERY_CONCURRENCY: d(
      positiveInt.max(256).optional(),
      'LINE deliveries one worker runs at once per LINE queue (their prefetch); each holds two pooled connections',
      'max(1, min(4, ⌊(pool − 2) / 4⌋))',
    ),
    HERALD_LINE_MAX_THROTTLE_WAIT_SECONDS: d(
      positiveInt.max(3_600).default(60),
      'a 429 whose Retry-After is longer goes back to the retry queue instead of waiting in the worker',
    ),
    HERALD_LINE_TOKEN_REFRESH_MARGIN_SECONDS: d(
      positiveInt.default(86_400),
      'a short-lived channel access token is re-issued this long before it expires',
    ),
    HERALD_LINE_CREDENTIALS_KEY: d(
      base64Key.optional(),
      'AES-256-GCM key (32 bytes, base64) that seals channel tokens and secrets (unset: a development key, with a warning)',
    ),
    HERALD_LINE_CREDENTIALS_KEY_ID: d(keyId.default('k1'), 'the id stored with every value the key seals'),
    HERALD_LINE_CREDENTIALS_OLD_KEYS: d(
      oldKeys.optional(),
      '`id:base64[,…]`: retired keys that still open older rows (key rotation, ADR 0021)',
    ),
  },
  secretVariables: ['HERALD_LINE_CREDENTIALS_KEY', 'HERALD_LINE_CREDENTIALS_OLD_KEYS'],
  secrets: (e) => [
    ...(e.HERALD_LINE_CREDENTIALS_KEY ? [e.HERALD_LINE_CREDENTIALS_KEY] : []),
    ...(e.HERALD_LINE_CREDENTIALS_OLD_KEYS?.split(',').map((pair) => pair.split(':')[1]!) ?? []),
  ],
  warnings: (e) =>
    e.HERALD_LINE_CREDENTIALS_KEY
      ? []
      : [
          'HERALD_LINE_CREDENTIALS_KEY is unset: LINE channel credentials are sealed with the development key',
        ],
  map(e, base): LineSettings {
    // Each delivery holds its inbox transaction's connection and records chunks on a second one; two
    // LINE queues, and room left for the heartbeat and the other consumers.
    const room = Math.floor((base.dbPoolSize - 2) / 4);
    const concurrency = e.HERALD_LINE_DELIVERY_CONCURRENCY ?? Math.max(1, Math.min(4, room));
    if (e.HERALD_LINE_DELIVERY_CONCURRENCY !== undefined && concurrency > room) {
      throw new ConfigError(
        'HERALD_LINE_DELIVERY_CONCURRENCY',
        `(${concurrency}) needs HERALD_DB_POOL_SIZE ≥ ${concurrency * 4 + 2} (it is ${base.dbPoolSize}): ` +
          'each of the two LINE queues runs this many deliveries, each holding two connections',
      );
    }
    const currentKey = e.HERALD_LINE_CREDENTIALS_KEY
      ? Buffer.from(e.HERALD_LINE_CREDENTIALS_KEY, 'base64')
      : DEVELOPMENT_KEY;
    const current = {
      id: e.HERALD_LINE_CREDENTIALS_KEY ? e.HERALD_LINE_CREDENTIALS_KEY_ID : 'dev',
      key: createSecretKey(currentKey),
    };
    const keys = new Map<string, KeyObject>([[current.id, current.key]]);
    for (const pair of e.HERALD_LINE_CREDENTIALS_OLD_KEYS?.split(',') ?? []) {
      const [id, value] = pair.split(':') as [string, string];
      if (id === current.id) {
        throw new ConfigError('HERALD_LINE_CREDENTIALS_OLD_KEYS', `key id '${id}' is the current key's id`);
      }
      keys.set(id, createSecretKey(Buffer.from(value, 'base64')));
    }
    return {
      apiBaseUrl: e.HERALD_LINE_API_BASE_URL.replace(/\/+$/, ''),
      requestTimeoutMs: e.HERALD_LINE_REQUEST_TIMEOUT_MS,
      rateLimits: {
        multicastPerSecond: e.HERALD_LINE_MULTICAST_PER_SECOND,
        broadcastPerHour: e.HERALD_LINE_BROADCAST_PER_HOUR,
        narrowcastPerHour: e.HERALD_LINE_NARROWCAST_PER_HOUR,
      },
      deliveryConcurrency: concurrency,
      maxThrottleWaitMs: e.HERALD_LINE_MAX_THROTTLE_WAIT_SECONDS * 1000,
      tokenRefreshMarginMs: e.HERALD_LINE_TOKEN_REFRESH_MARGIN_SECONDS * 1000,
      keyRing: { current, keys, development: !e.HERALD_LINE_CREDENTIALS_KEY },
    };
  },
});

export type LineConfig = SettingsOf<typeof lineSettings>;
