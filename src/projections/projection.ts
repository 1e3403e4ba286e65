/**
 * The asynchronous projection contract. A projection is a read model fed from the event log and,
 * optionally, from publish receipts; the projector (projector.ts) hands it batches in log order —
 * gap-safe, so nothing is skipped (ARCHITECTURE: readers follow `tx < pg_snapshot_xmin`) — inside
 * the transaction that also advances its checkpoint, so each entry is applied exactly once.
 * Projections write only their own tables, and write them through `target`, so a rebuild can fill
 * shadow tables beside the live ones and swap them in.
 */

import type { PublishReceipt } from '../adapters/postgres/receipt-queries.js';
import type { SqlClient } from '../ports/database.js';
import type { StoredEvent } from '../ports/events.js';

export type ProjectionSource = 'events' | 'receipts';

/** Where a batch is written: the live tables, or the shadow tables of a rebuild. */
export interface ProjectionTarget {
  readonly shadow: boolean;
}

export interface Projection {
  readonly name: string;
  /** The live tables it owns; a rebuild writes `<table>_rebuild` and swaps it in. */
  readonly tables: readonly string[];
  /** Sources it follows, each with its own checkpoint. */
  readonly sources: readonly ProjectionSource[];
  /** Applies a batch of events (every stream type, in log order: filter inside). */
  applyEvents(tx: SqlClient, events: readonly StoredEvent[], target: ProjectionTarget): Promise<void>;
  /** Applies a batch of publish receipts (only called when `sources` includes 'receipts'). */
  applyReceipts?(tx: SqlClient, receipts: readonly PublishReceipt[], target: ProjectionTarget): Promise<void>;
}

export const SHADOW_SUFFIX = '_rebuild';

export const shadowTable = (table: string) => `${table}${SHADOW_SUFFIX}`;

/** Checkpoint names: `<name>` for events, `<name>/receipts`; a rebuild's are prefixed `rebuild:`. */
export function checkpointName(
  projection: string,
  source: ProjectionSource,
  target: ProjectionTarget,
): string {
  const base = source === 'events' ? projection : `${projection}/receipts`;
  return target.shadow ? `rebuild:${base}` : base;
}
