/**
 * The tick role against real Redis and PostgreSQL: Redis de-duplicates ticks across replicas, and
 * when it is down every replica writes while the event stream's unique version keeps exactly one
 * tick per minute in the outbox. "Redis down" is a closed loopback port (or a TCP proxy we stop);
 * the shared Redis is never touched beyond per-test keys.
 */
import { randomInt } from 'node:crypto';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisLock } from '../../src/adapters/redis/redis-lock.js';
import {
  CampaignTick,
  type CampaignTickOptions,
  TICK_EVENT_TYPE,
  TICK_KEY_TTL_SECONDS,
  tickPeriodKey,
} from '../../src/aggregates/campaign/tick.js';
import { PROCESS_CAMPAIGN_QUEUE, TICK_STREAM_TYPE } from '../../src/aggregates/campaign/topology.js';
import { databaseNow } from '../../src/eventstore/command-handler.js';
import { type Logger, silentLogger } from '../../src/logger.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../support/services.js';

let t: TestDatabase;
const cleanups: (() => Promise<unknown> | unknown)[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A port nothing listens on: bind an ephemeral port, then close it. */
async function closedPortUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `redis://127.0.0.1:${port}`;
}

function lock(url: string, logger: Logger = silentLogger): RedisLock {
  const redisLock = new RedisLock({ url, logger, name: uniqueName('herald-tick-test') });
  cleanups.push(() => redisLock.close());
  return redisLock;
}

function tick(options: Partial<CampaignTickOptions> & Pick<CampaignTickOptions, 'lock'>): CampaignTick {
  const instance = new CampaignTick({ db: t.db, logger: silentLogger, ...options });
  cleanups.push(() => instance.stop());
  return instance;
}

/** A minute no other test uses (each test ticks its own; the stream is per minute). */
function freshMinute(): Date {
  return new Date(Date.UTC(2030, 0, 1) + randomInt(0, 5_000_000) * 60_000);
}

async function ticksFor(streamId: string) {
  const { rows } = await t.db.query<{
    destination: string;
    sink: string;
    payload: { minute: string };
    data: { minute: string; fallback: boolean };
    type: string;
    version: number;
  }>(
    `select o.destination, o.sink, o.payload, e.data, e.type, e.version
       from outbox o join event e on e.position = o.event_position
      where e.stream_type = $1 and e.stream_id = $2 order by o.id`,
    [TICK_STREAM_TYPE, streamId],
  );
  return rows;
}

function capturingLogger(): { logger: Logger; lines: { level: number; msg: string }[] } {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(JSON.parse(String(chunk)));
      callback();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

/** Forwards a loopback port to the real Redis, so a test can take "Redis" away and bring it back. */
class RedisProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly upstream: URL) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async up(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(Number(this.upstream.port), this.upstream.hostname);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe('RedisLock', () => {
  it('SET NX EX: the first call acquires, later calls see the key taken; the key expires after the TTL', async () => {
    const key = `${uniqueName('TICK')}:k`;
    const a = lock(requireEnv('REDIS_URL'));
    const b = lock(requireEnv('REDIS_URL'));
    expect(await a.setOnce(key, TICK_KEY_TTL_SECONDS)).toBe('acquired');
    expect(await b.setOnce(key, TICK_KEY_TTL_SECONDS)).toBe('taken');
    expect(await a.setOnce(key, TICK_KEY_TTL_SECONDS)).toBe('taken');

    const raw = new Redis(requireEnv('REDIS_URL'));
    cleanups.push(() => raw.quit());
    const pttl = await raw.pttl(key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(TICK_KEY_TTL_SECONDS * 1000);
    await raw.del(key);
  });

  it('Redis unreachable: answers unavailable at once, never throws, and logs the outage', async () => {
    const { logger, lines } = capturingLogger();
    const down = lock(await closedPortUrl(), logger);
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      expect(await down.setOnce(`${uniqueName('TICK')}:k`, 55)).toBe('unavailable');
      expect(performance.now() - started).toBeLessThan(1_500);
    }
    expect(lines.some((line) => line.level === 40 && /redis unavailable/.test(line.msg))).toBe(true);
    const started = performance.now();
    await down.close();
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('Redis goes away and comes back: fails fast meanwhile and reconnects in the background', async () => {
    const proxy = new RedisProxy(new URL(requireEnv('REDIS_URL')));
    await proxy.up();
    cleanups.push(() => proxy.down());
    const prefix = uniqueName('TICK');
    const redisLock = lock(proxy.url);
    expect(await redisLock.setOnce(`${prefix}:1`, 55)).toBe('acquired');

    await proxy.down();
    await waitFor(() => !redisLock.ready, { timeoutMs: 5_000, what: 'the client to notice the outage' });
    const started = performance.now();
    expect(await redisLock.setOnce(`${prefix}:2`, 55)).toBe('unavailable');
    expect(performance.now() - started).toBeLessThan(1_500);

    await proxy.up();
    await waitFor(async () => (await redisLock.setOnce(`${prefix}:3`, 55)) === 'acquired', {
      timeoutMs: 10_000,
      what: 'the client to reconnect by itself',
    });
    expect(await redisLock.setOnce(`${prefix}:3`, 55)).toBe('taken');
  });
});

describe('CampaignTick.tickOnce', () => {
  it('Redis down: publishes anyway (event with fallback: true, one outbox row) without hanging', async () => {
    const { logger, lines } = capturingLogger();
    const replica = tick({ lock: lock(await closedPortUrl()), logger, keyPrefix: uniqueName('TICK') });
    const minute = freshMinute();

    const started = performance.now();
    expect(await replica.tickOnce(minute)).toBe('published');
    expect(performance.now() - started).toBeLessThan(2_000);

    const rows = await ticksFor(tickPeriodKey(minute));
    expect(rows).toEqual([
      {
        destination: PROCESS_CAMPAIGN_QUEUE,
        sink: 'amqp',
        payload: { minute: minute.toISOString() },
        data: { minute: minute.toISOString(), fallback: true },
        type: TICK_EVENT_TYPE,
        version: 1,
      },
    ]);
    expect(lines.some((line) => line.level === 40 && /writing the tick anyway/.test(line.msg))).toBe(true);
  });

  it('two replicas, Redis up, same minute at once: one publishes, the other skips; one outbox row', async () => {
    const keyPrefix = uniqueName('TICK');
    const a = tick({ lock: lock(requireEnv('REDIS_URL')), keyPrefix });
    const b = tick({ lock: lock(requireEnv('REDIS_URL')), keyPrefix });
    const minute = freshMinute();

    const results = await Promise.all([a.tickOnce(minute), b.tickOnce(minute)]);
    expect(results.sort()).toEqual(['published', 'skipped']);
    const rows = await ticksFor(tickPeriodKey(minute));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.data).toEqual({ minute: minute.toISOString(), fallback: false });
  });

  it('two replicas, Redis down, same minute at once: one publishes, the other is a duplicate; one outbox row', async () => {
    const keyPrefix = uniqueName('TICK');
    const a = tick({ lock: lock(await closedPortUrl()), keyPrefix });
    const b = tick({ lock: lock(await closedPortUrl()), keyPrefix });
    const minute = freshMinute();

    const results = await Promise.all([a.tickOnce(minute), b.tickOnce(minute)]);
    expect(results.sort()).toEqual(['duplicate', 'published']);
    const rows = await ticksFor(tickPeriodKey(minute));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.data.fallback).toBe(true);
  });

  it('no Redis configured (lock null) behaves like Redis down; a later Redis winner is a duplicate too', async () => {
    const keyPrefix = uniqueName('TICK');
    const minute = freshMinute();
    expect(await tick({ lock: null, keyPrefix }).tickOnce(minute)).toBe('published');
    // Redis wins the key, but the minute was already written by a fallback replica.
    expect(await tick({ lock: lock(requireEnv('REDIS_URL')), keyPrefix }).tickOnce(minute)).toBe('duplicate');
    expect(await ticksFor(tickPeriodKey(minute))).toHaveLength(1);
  });
});

describe('CampaignTick loop', () => {
  const periodMs = 300;

  async function runLoops(replicas: CampaignTick[], periods: number) {
    const t0 = await databaseNow(t.db);
    for (const replica of replicas) replica.start();
    const counts = await waitFor(
      async () => {
        const { rows } = await t.db.query<{ stream_id: string; recorded_at: Date; outbox_rows: number }>(
          `select e.stream_id, e.recorded_at, count(o.id)::int as outbox_rows
             from event e left join outbox o on o.event_position = e.position
            where e.stream_type = $1 and e.recorded_at >= $2
            group by e.stream_id, e.recorded_at order by e.stream_id`,
          [TICK_STREAM_TYPE, t0],
        );
        return rows.length >= periods ? rows : undefined;
      },
      { timeoutMs: 15_000, what: `${periods} ticks` },
    );
    const started = performance.now();
    await Promise.all(replicas.map((replica) => replica.stop()));
    const stopMs = performance.now() - started;
    return { t0, counts, stopMs };
  }

  it('ticks once per period, at the boundary by database time, across replicas; stop() is prompt', async () => {
    const keyPrefix = uniqueName('TICK');
    const replicas = [
      tick({ lock: lock(requireEnv('REDIS_URL')), keyPrefix, periodMs }),
      tick({ lock: lock(requireEnv('REDIS_URL')), keyPrefix, periodMs }),
    ];
    const { t0, counts, stopMs } = await runLoops(replicas, 3);

    expect(stopMs).toBeLessThan(1_000);
    const streamIds = counts.map((row) => row.stream_id);
    expect(new Set(streamIds).size).toBe(streamIds.length);
    for (const row of counts) {
      expect(row.outbox_rows).toBe(1);
      // The stream id is the period start: aligned to the period, after the loop started, and the
      // tick was written no earlier than that boundary by the database clock.
      const periodStart = new Date(`${row.stream_id}Z`).getTime();
      expect(periodStart % periodMs).toBe(0);
      expect(periodStart).toBeGreaterThan(t0.getTime());
      expect(row.recorded_at.getTime()).toBeGreaterThanOrEqual(periodStart);
    }
    // Redis decided every period: no replica fell back, and the losers skipped.
    const stats = replicas.map((replica) => replica.stats);
    expect(stats.reduce((sum, s) => sum + s.fallback + s.duplicate + s.errors, 0)).toBe(0);
    expect(stats.reduce((sum, s) => sum + s.skipped, 0)).toBeGreaterThanOrEqual(counts.length - 1);
  });

  it('replicas whose Redis is down still leave exactly one tick per period', async () => {
    const keyPrefix = uniqueName('TICK');
    const replicas = [
      tick({ lock: lock(requireEnv('REDIS_URL')), keyPrefix, periodMs }),
      tick({ lock: lock(await closedPortUrl()), keyPrefix, periodMs }),
      tick({ lock: null, keyPrefix, periodMs }),
    ];
    const { counts, stopMs } = await runLoops(replicas, 2);

    expect(stopMs).toBeLessThan(1_000);
    for (const row of counts) expect(row.outbox_rows).toBe(1);
    expect(replicas.reduce((sum, replica) => sum + replica.stats.duplicate, 0)).toBeGreaterThan(0);
    expect(replicas.reduce((sum, replica) => sum + replica.stats.errors, 0)).toBe(0);
  });
});
