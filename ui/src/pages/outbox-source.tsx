/**
 * What an outbox row was written for, as a link: every row carries its origin's stream in its headers
 * (`x-herald-stream-type`, `x-herald-stream-id`, stamped by the outbox writer), so a dead row leads to
 * its campaign, action or cron run (a delivery stream's row to its campaign when the payload names it).
 */
import { Link } from 'react-router-dom';
import type { Schemas } from '../api/client';

type Row = Pick<Schemas['OutboxRow'], 'headers' | 'payload'>;

export interface RowSource {
  label: string;
  /** The dashboard page; null when there is none for this kind of stream. */
  to: string | null;
  title: string;
}

const text = (value: unknown): string | null => (typeof value === 'string' && value ? value : null);

export function sourceOf(row: Row): RowSource | null {
  const streamType = text(row.headers['x-herald-stream-type']);
  const streamId = text(row.headers['x-herald-stream-id']);
  const payload = (row.payload && typeof row.payload === 'object' ? row.payload : {}) as Record<
    string,
    unknown
  >;
  const short = (id: string) => id.slice(0, 8);
  const title = streamType && streamId ? `${streamType} ${streamId}` : 'origin unknown';
  switch (streamType) {
    case 'campaign':
      return streamId ? { label: `campaign ${short(streamId)}`, to: `/campaigns/${streamId}`, title } : null;
    case 'scheduled_action':
      return streamId ? { label: `action ${short(streamId)}`, to: `/actions/${streamId}`, title } : null;
    case 'cron_job':
      return streamId ? { label: `cron job ${short(streamId)}`, to: `/cron/${streamId}`, title } : null;
    case 'job_run':
      return streamId ? { label: `cron run ${short(streamId)}`, to: `/cron-runs/${streamId}`, title } : null;
  }
  // A delivery or gateway stream: the payload names what it delivers for.
  const campaignId = text(payload.campaignId);
  if (campaignId) return { label: `campaign ${short(campaignId)}`, to: `/campaigns/${campaignId}`, title };
  const actionId = text(payload.actionId);
  if (actionId) return { label: `action ${short(actionId)}`, to: `/actions/${actionId}`, title };
  const runId = text(payload.runId);
  if (runId) return { label: `cron run ${short(runId)}`, to: `/cron-runs/${runId}`, title };
  return streamType
    ? { label: `${streamType} ${streamId ? short(streamId) : ''}`.trim(), to: null, title }
    : null;
}

export function SourceLink({ row }: { row: Row }) {
  const source = sourceOf(row);
  if (!source) return <span className="muted">—</span>;
  return source.to ? (
    <Link className="source-link mono" to={source.to} title={source.title} data-testid="row-source">
      {source.label}
    </Link>
  ) : (
    <span className="source-link mono muted" title={source.title}>
      {source.label}
    </span>
  );
}
