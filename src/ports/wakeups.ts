/**
 * Wake-up signals (LISTEN/NOTIFY). They only cut latency (invariant 7): every waiter also has a
 * fallback poll, so a lost or missing notification delays work and never loses it.
 */
export interface WakeupSignal {
  /**
   * Signals the channel after the caller's transaction committed. Coalesced; never throws. A change
   * channel's signal names the organization the change concerns (the live stream tells only that
   * organization); wake-up channels need none.
   */
  signal(channel: string, organizationId?: string | null): void;
}

/**
 * A notification's payload: the organizations its change concerns (`organizationsOf`), or undefined for
 * the wake-up after a (re)connection, when notifications may have been missed.
 */
export type OnWake = (payload?: string) => void;

export interface WakeupListener {
  /** Calls `onWake` for each notification on `channel` (with its payload), and once after every (re)connection (without). */
  subscribe(channel: string, onWake: OnWake): Promise<void>;
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

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; a change's payloads stay below this. */
export const MAX_NOTIFY_PAYLOAD_BYTES = 7_900;

/**
 * A change notification's payloads: the organizations as a JSON array of ids, split so that none
 * exceeds MAX_NOTIFY_PAYLOAD_BYTES (an id is at most 200 characters). No organization: one empty payload.
 */
export function organizationPayloads(organizationIds: Iterable<string>): string[] {
  const payloads: string[] = [];
  let batch: string[] = [];
  let bytes = 2;
  for (const id of organizationIds) {
    const size = Buffer.byteLength(JSON.stringify(id), 'utf8') + 1;
    if (batch.length > 0 && bytes + size > MAX_NOTIFY_PAYLOAD_BYTES) {
      payloads.push(JSON.stringify(batch));
      batch = [];
      bytes = 2;
    }
    batch.push(id);
    bytes += size;
  }
  if (batch.length > 0 || payloads.length === 0) payloads.push(batch.length > 0 ? JSON.stringify(batch) : '');
  return payloads;
}

/** The organizations a change notification names (none for an empty or unreadable payload). */
export function organizationsOf(payload: string): string[] {
  if (payload === '') return [];
  try {
    const parsed: unknown = JSON.parse(payload);
    return Array.isArray(parsed) ? parsed.filter((id): id is string => typeof id === 'string') : [];
  } catch {
    return [];
  }
}
