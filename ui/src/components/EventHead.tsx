/**
 * The head line of one event in a timeline (campaign and action pages): when, its type (a button
 * that opens its data), its version and who caused it.
 */
import { formatTime } from '../format';
import { ActorName } from './ActorName';

export function EventHead({
  event,
  actor,
  onToggle,
}: {
  event: { recordedAt: string; type: string; version: number };
  actor: string | null | undefined;
  onToggle(): void;
}) {
  return (
    <>
      <span className="mono small-text muted">{formatTime(event.recordedAt)}</span>{' '}
      <button type="button" className="link event-type" onClick={onToggle}>
        {event.type}
      </button>{' '}
      <span className="muted small-text">v{event.version}</span>{' '}
      <span className="small-text">
        by <ActorName actor={actor} />
      </span>
    </>
  );
}
