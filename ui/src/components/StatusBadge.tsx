/** A status as a colored pill: one color per meaning (ok, running, waiting, warning, failed, muted). */

const TONES: Record<string, string> = {
  // done / good
  sent: 'ok',
  completed: 'ok',
  succeeded: 'ok',
  fired: 'ok',
  published: 'ok',
  delivered: 'ok',
  processed: 'ok',
  active: 'ok',
  ok: 'ok',
  healthy: 'ok',
  live: 'ok',
  // in progress
  running: 'run',
  dispatching: 'run',
  claimed: 'run',
  sending: 'run',
  pending: 'run',
  processing: 'run',
  backfilled: 'run',
  // waiting for time or input
  scheduled: 'wait',
  waiting: 'wait',
  draft: 'wait',
  queued: 'wait',
  due: 'wait',
  upcoming: 'wait',
  // attention
  paused: 'warn',
  parked: 'warn',
  retrying: 'warn',
  skipped: 'warn',
  deferred: 'warn',
  stale: 'warn',
  polling: 'warn',
  expired: 'warn',
  // failed
  dead: 'bad',
  failed: 'bad',
  error: 'bad',
  missed: 'bad',
  refused: 'bad',
  lagging: 'bad',
  // ended without effect
  cancelled: 'muted',
  canceled: 'muted',
  deleted: 'muted',
  revoked: 'muted',
  superseded: 'muted',
};

export type Tone = 'ok' | 'run' | 'wait' | 'warn' | 'bad' | 'muted';

export function toneOf(status: string): Tone {
  return (TONES[status.toLowerCase()] as Tone | undefined) ?? 'muted';
}

export interface StatusBadgeProps {
  status: string | null | undefined;
  /** Overrides the color the status would get. */
  tone?: Tone;
  title?: string;
}

export function StatusBadge({ status, tone, title }: StatusBadgeProps) {
  if (!status) return <span className="badge badge-muted">—</span>;
  return (
    <span className={`badge badge-${tone ?? toneOf(status)}`} title={title} data-status={status}>
      {status.replace(/_/g, ' ')}
    </span>
  );
}
