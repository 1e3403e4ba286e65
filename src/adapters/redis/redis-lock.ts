/**
 * A thin ioredis adapter for one-shot keys: `setOnce(key, ttl)` is `SET key 1 NX EX ttl`, which the tick
 * role uses so that one of N replicas writes each minute's tick. It only cuts load (invariant 7): the
 * caller treats 'unavailable' as "go ahead" and the database decides. So it never stalls a caller: no
 * offline queue, bounded connect and command timeouts, reconnection in the background, driver errors
 * mapped to 'unavailable'. ACL credentials and TLS come from config.redis. ADR 0006, ADR 0015.
 */
import { createConnection, type Socket } from 'node:net';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import type { Redis, RedisOptions } from 'ioredis';
import { errorMessage } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { retryDelayMs } from '../../runtime/backoff.js';
import type { TlsFiles } from '../../settings/connections.js';
import { lazyPackage } from '../lazy-package.js';
import { readTlsFiles } from '../tls-files.js';

const ioredis = lazyPackage<typeof import('ioredis')>('ioredis');

export type SetOnceResult = 'acquired' | 'taken' | 'unavailable';

export interface RedisLockOptions {
  url: string;
  /** ACL user and password; they take precedence over credentials in the URL. */
  username?: string | undefined;
  password?: string | undefined;
  /** CA and client certificate files of a rediss:// URL. */
  tls?: TlsFiles | undefined;
  logger: Logger;
  /** Bounds the TCP connect, each command, and how long a command waits for a connection in progress. */
  timeoutMs?: number;
  /** Connection name shown by CLIENT LIST. */
  name?: string;
}

/** Background reconnect delay: fast first retries, capped so an outage costs at most ~2 s once Redis is back. */
const reconnectDelayMs = (attempt: number) =>
  retryDelayMs(attempt + 1, { baseMs: 50, maxMs: 2_000, jitter: 'equal' });

/**
 * ioredis's own connector, and the client after it, listen for a socket's 'error' with once(); a TLS
 * socket can emit two (our refusal of the server's certificate, then the server's alert on the
 * half-done handshake), and the second, with no listener left, is an uncaught exception that ends
 * the process (redis/ioredis#962, never merged). This is ioredis's StandaloneConnector with one more
 * listener that stays for the socket's life. Host, port and tls come from ioredis's parsed options.
 */
function guardedConnector(onSocketError: (error: Error) => void) {
  return class GuardedConnector extends ioredis().AbstractConnector {
    private readonly target: RedisOptions;

    constructor(options: unknown) {
      const target = options as RedisOptions;
      super(target.disconnectTimeout ?? 2_000);
      this.target = target;
    }

    connect(): Promise<Socket | TLSSocket> {
      this.connecting = true;
      const { host, port, family, tls } = this.target;
      return new Promise((resolve, reject) => {
        // ioredis expects the socket on the next tick, after its own status change.
        process.nextTick(() => {
          if (!this.connecting) return reject(new Error('Connection is closed.'));
          try {
            const address = { host: host ?? 'localhost', port: port ?? 6379, ...(family ? { family } : {}) };
            const stream = tls ? connectTls({ ...address, ...tls }) : createConnection(address);
            let errors = 0;
            stream.on('error', (error) => {
              if (errors++ === 0)
                this.firstError = error; // as ioredis's connector records it
              else onSocketError(error);
            });
            this.stream = stream;
            resolve(stream);
          } catch (error) {
            reject(error);
          }
        });
      });
    }
  };
}

/** Statuses in which a connection attempt is under way and a command may briefly wait for it. */
const CONNECTING = new Set(['wait', 'connecting', 'connect']);

export class RedisLock {
  private readonly client: Redis;
  private readonly timeoutMs: number;
  private readonly logger: Logger;
  /** Log the first failure of an outage as a warning, the rest at debug, and the recovery once. */
  private down = false;
  private closed = false;

  constructor(options: RedisLockOptions) {
    this.timeoutMs = options.timeoutMs ?? 500;
    this.logger = options.logger.child({ component: 'redis' });
    const credentials: RedisOptions = {
      ...(options.username !== undefined ? { username: options.username } : {}),
      ...(options.password !== undefined ? { password: options.password } : {}),
      ...(options.tls ? { tls: readTlsFiles(options.tls, 'Redis') } : {}),
    };
    // ioredis lets a URL's own user:password win over options: pass them only one way.
    const url = new URL(options.url);
    if (options.username !== undefined || options.password !== undefined) {
      url.username = '';
      url.password = '';
    }
    this.client = new (ioredis().Redis)(url.toString(), {
      ...credentials,
      connectionName: options.name ?? 'herald',
      connectTimeout: this.timeoutMs,
      commandTimeout: this.timeoutMs,
      // Fail fast while disconnected: a queued SET would fire minutes late, for a stale minute.
      enableOfflineQueue: false,
      // Never resend a SET NX whose reply was lost: if it had been applied, the resend would read
      // our own key as "taken" and nobody would publish that minute. Ambiguity must mean 'unavailable'.
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      retryStrategy: (attempt) => (this.closed ? null : reconnectDelayMs(attempt)),
      // The client's 'error' event below reports a socket's first error; a later one is only logged.
      Connector: guardedConnector((error) => this.logger.debug({ err: error }, 'redis socket error')),
    });
    this.client.on('error', (error: Error) => this.noteFailure(error));
    this.client.on('ready', () => {
      if (this.down) this.logger.info('redis reachable again');
      this.down = false;
    });
  }

  /** `SET key 1 NX EX ttlSeconds`: 'acquired' if this call created the key, 'taken' if it existed. */
  async setOnce(key: string, ttlSeconds: number): Promise<SetOnceResult> {
    if (this.closed) return 'unavailable';
    try {
      await this.untilReady();
      const reply = await this.client.set(key, '1', 'EX', ttlSeconds, 'NX');
      this.down = false;
      return reply === 'OK' ? 'acquired' : 'taken';
    } catch (error) {
      this.noteFailure(error, key);
      return 'unavailable';
    }
  }

  /** True while connected and ready for commands. */
  get ready(): boolean {
    return this.client.status === 'ready';
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.client.status === 'ready') {
      try {
        await this.client.quit();
        return;
      } catch {
        // fall through to a hard disconnect
      }
    }
    this.client.disconnect();
  }

  /**
   * Right after construction (or mid-reconnect) a connection may be seconds from ready; a command
   * sent then would be refused. Wait for it, but never longer than the timeout, and not at all
   * when the client is between reconnect attempts (Redis is down: fail fast).
   */
  private untilReady(): Promise<void> {
    if (this.client.status === 'ready' || !CONNECTING.has(this.client.status)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.client.off('ready', done);
        this.client.off('close', done);
        this.client.off('end', done);
        resolve();
      };
      const timer = setTimeout(done, this.timeoutMs);
      this.client.once('ready', done);
      this.client.once('close', done);
      this.client.once('end', done);
    });
  }

  private noteFailure(error: unknown, key?: string): void {
    const fields = { err: error, ...(key ? { key } : {}) };
    if (this.down || this.closed) {
      this.logger.debug(fields, `redis unavailable: ${errorMessage(error)}`);
      return;
    }
    this.down = true;
    this.logger.warn(fields, `redis unavailable: ${errorMessage(error)}`);
  }
}
