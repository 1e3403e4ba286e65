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
  /**
   * Something of this stream type (or `outbox`) changed: what the dashboard's live stream (GET /v1/stream)
   * listens to. Coalesced to at most one NOTIFY per CHANGE_NOTIFY_MS per process and channel.
   */
  changed: (schema: string, streamType: string) => `${schema}.changed.${streamType}`,
} as const;

/** Change notifications only refresh dashboards: one a second per process and channel is plenty. */
export const CHANGE_NOTIFY_MS = 1_000;

export const isChangeChannel = (channel: string): boolean => channel.includes('.changed.');
