/**
 * Wake-up signals (LISTEN/NOTIFY). They only cut latency (invariant 7): every waiter also has a
 * fallback poll, so a lost or missing notification delays work and never loses it.
 */
export interface WakeupSignal {
  /** Signals the channel after the caller's transaction committed. Coalesced; never throws. */
  signal(channel: string): void;
}

export interface WakeupListener {
  /** Calls `onWake` for each notification on `channel`, and once after every (re)connection. */
  subscribe(channel: string, onWake: () => void): Promise<void>;
  close(): Promise<void>;
}

/** Channel names are per schema so several Herald installations can share one database. */
export const channels = {
  outbox: (schema: string) => `${schema}.outbox`,
  due: (schema: string) => `${schema}.due`,
} as const;
