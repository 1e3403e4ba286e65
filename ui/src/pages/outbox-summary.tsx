// The overview's outbox counters as one row per sink and destination, and the table and column that
// show them (Overview and Outbox pages).
import type { Schemas } from '../api/client';
import { type Column, DataTable } from '../components';
import { formatCount, formatDuration } from '../format';

export interface DestinationRow {
  sink: string;
  destination: string;
  pending: number;
  oldestPendingAgeSeconds: number;
  dead: number;
}

/** Pending and dead counts of the overview, one row per sink and destination. */
export function byDestination(o: Schemas['Overview']['outbox'] | undefined): DestinationRow[] {
  const rows = new Map<string, DestinationRow>();
  const entry = (sink: string, destination: string) => {
    const key = `${sink}:${destination}`;
    let row = rows.get(key);
    if (!row) {
      row = { sink, destination, pending: 0, oldestPendingAgeSeconds: 0, dead: 0 };
      rows.set(key, row);
    }
    return row;
  };
  for (const d of o?.pending ?? []) {
    const row = entry(d.sink, d.destination);
    row.pending = d.rows;
    row.oldestPendingAgeSeconds = d.oldestAgeSeconds;
  }
  for (const d of o?.dead ?? []) entry(d.sink, d.destination).dead = d.rows;
  return [...rows.values()].sort((a, b) => b.pending - a.pending || b.dead - a.dead);
}

/** A row's `sink:destination`, the sink muted. */
export function destinationColumn<T extends { sink: string; destination: string }>(): Column<T> {
  return {
    key: 'destination',
    header: 'Destination',
    render: (r) => (
      <span className="mono">
        <span className="muted">{r.sink}:</span>
        {r.destination}
      </span>
    ),
  };
}

/** The outbox backlog per destination: pending rows, the oldest one's age, dead rows. */
export function DestinationTable(props: { label: string; rows: DestinationRow[]; loading?: boolean }) {
  return (
    <DataTable
      label={props.label}
      rows={props.rows}
      rowKey={(d) => `${d.sink}:${d.destination}`}
      loading={props.loading ?? false}
      empty="Nothing pending, nothing dead."
      columns={[
        destinationColumn<DestinationRow>(),
        { key: 'pending', header: 'Pending', align: 'right', render: (d) => formatCount(d.pending) },
        {
          key: 'oldest',
          header: 'Oldest pending',
          align: 'right',
          render: (d) => (d.pending > 0 ? formatDuration(d.oldestPendingAgeSeconds) : '—'),
        },
        {
          key: 'dead',
          header: 'Dead',
          align: 'right',
          render: (d) => (d.dead > 0 ? <span className="text-bad">{formatCount(d.dead)}</span> : '0'),
        },
      ]}
    />
  );
}
