// The overview's outbox counters as one row per sink and destination (Overview and Outbox pages).
import type { Schemas } from '../api/client';

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
