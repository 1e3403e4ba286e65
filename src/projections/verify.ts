/**
 * `herald verify`: checks invariant 8 for every stream of every registered stream type with a state model
 * (folding its events through `evolve` gives exactly its row), and reports stream types in the log that no
 * registration claims. One server-side cursor in (stream id, version) order, folded a stream at a time and
 * compared in chunks, keeps memory bounded; one read-only repeatable-read snapshot keeps a live system green
 * (invariant 1) and holds back no log follower. Each drift names the stream, the field, both values and
 * the first event after which they differ. With an organization, only the streams that organization's
 * first events name are scanned (the API's verify: an organization sees only its own streams, counts
 * included) and the log-wide check of unclaimed stream types is left out. ADR 0008, ADR 0009, ADR 0028.
 */
import { SNAPSHOT_READ_ONLY } from '../adapters/postgres/cursor-queries.js';
import { distinctStreamTypes, readStream, scanStreams } from '../adapters/postgres/event-queries.js';
import { errorMessage } from '../errors.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { StoredEvent } from '../ports/events.js';
import type { StateFields, StateModel, StateModelCatalogue } from './state-models.js';

export interface EventRef {
  version: number;
  position: number;
  type: string;
  recordedAt: Date;
}

export type DriftKind =
  | 'field'
  | 'missing-row'
  | 'row-without-events'
  | 'unreplayable'
  | 'version-gap'
  | 'unclaimed-stream-type';

export interface Drift {
  kind: DriftKind;
  streamType: string;
  streamId: string;
  /** The state field (or 'version'); null for drifts of the whole row or stream. */
  field: string | null;
  /** The stored row's value. */
  row: unknown;
  /** The value the events fold to. */
  replay: unknown;
  /** The first event after which row and replay differ (null: no event explains the row). */
  firstDifferingEvent: EventRef | null;
  detail: string;
}

export interface VerifyReport {
  /** The organization whose streams were verified; null: every stream. */
  organizationId: string | null;
  streamTypes: string[];
  streams: number;
  events: number;
  /** Streams with at least one drift. */
  driftedStreams: number;
  drifts: Drift[];
  /** True when more drifts were found than `maxDrifts` kept. */
  truncated: boolean;
  ms: number;
}

export interface VerifyOptions {
  /** Default: every stream type with a state model, and the check that every stream type is claimed. */
  streamTypes?: readonly string[];
  /** Events per cursor fetch. */
  batchSize?: number;
  /** Finished streams compared with their rows per look-up. */
  compareEvery?: number;
  /** Drifts kept in the report (all are counted). */
  maxDrifts?: number;
  /** Called for each drift as it is found (the CLI prints them while the scan goes on). */
  onDrift?: (drift: Drift) => void;
  /**
   * Only this organization's streams (each stream's organization is the one its first event names; a
   * row without events, its row's). Default: every stream, and the check that every stream type is
   * claimed.
   */
  organizationId?: string;
}

interface Fold {
  streamId: string;
  state: unknown;
  version: number;
  events: number;
  first: EventRef;
  broken: { kind: 'unreplayable' | 'version-gap'; event: EventRef; detail: string } | null;
}

const ref = (e: StoredEvent): EventRef => ({
  version: e.version,
  position: e.position,
  type: e.type,
  recordedAt: e.recordedAt,
});

/** JSON with object keys sorted: jsonb keeps keys in its own order, so a row's objects come back reordered. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
const same = (a: unknown, b: unknown) => a === b || canonical(a) === canonical(b);

export async function verifyStates(
  db: Database,
  registry: StateModelCatalogue,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  const started = Date.now();
  const models = (options.streamTypes ?? [...registry.stateModels.keys()]).map((t) =>
    registry.stateModelFor(t),
  );
  const batchSize = options.batchSize ?? 10_000;
  const compareEvery = options.compareEvery ?? 2_000;
  const maxDrifts = options.maxDrifts ?? 1_000;
  const organizationId = options.organizationId;
  const report: VerifyReport = {
    organizationId: organizationId ?? null,
    streamTypes: models.map((m) => m.streamType),
    streams: 0,
    events: 0,
    driftedStreams: 0,
    drifts: [],
    truncated: false,
    ms: 0,
  };
  const record = (drifts: Drift[]) => {
    if (drifts.length === 0) return;
    report.driftedStreams++;
    for (const drift of drifts) {
      options.onDrift?.(drift);
      if (report.drifts.length < maxDrifts) report.drifts.push(drift);
      else report.truncated = true;
    }
  };

  await db.transaction(async (tx) => {
    await tx.query(SNAPSHOT_READ_ONLY);
    for (const model of models) {
      let current: Fold | null = null;
      let finished: Fold[] = [];
      const flush = async () => {
        const folds = finished;
        finished = [];
        report.streams += folds.length;
        for (const drifts of await compareFolds(tx, model, folds)) record(drifts);
      };
      const organization =
        organizationId === undefined
          ? undefined
          : { id: organizationId, of: (first: StoredEvent) => model.organizationOfStream(first) };
      const scan = { streamType: model.streamType, until: null, batchSize, organization };
      await scanStreams(tx, scan, async (events) => {
        for (const event of events) {
          report.events++;
          if (current?.streamId !== event.streamId) {
            if (current) finished.push(current);
            current = {
              streamId: event.streamId,
              state: model.initial(),
              version: 0,
              events: 0,
              first: ref(event),
              broken: null,
            };
          }
          const fold: Fold = current;
          fold.events++;
          if (fold.broken) continue;
          if (event.version !== fold.version + 1) {
            fold.broken = {
              kind: 'version-gap',
              event: ref(event),
              detail: `version ${event.version} follows version ${fold.version}`,
            };
            continue;
          }
          try {
            fold.state = model.apply(fold.state, event);
            fold.version = event.version;
          } catch (error) {
            fold.broken = { kind: 'unreplayable', event: ref(event), detail: errorMessage(error) };
          }
        }
        if (finished.length >= compareEvery) await flush();
      });
      if (current) finished.push(current);
      await flush();
      for (const streamId of await rowsWithoutEvents(tx, model, maxDrifts, organizationId)) {
        record([
          {
            kind: 'row-without-events',
            streamType: model.streamType,
            streamId,
            field: null,
            row: 'present',
            replay: 'no events',
            firstDifferingEvent: null,
            detail: `a ${model.table} row exists but stream ${model.streamType}/${streamId} has no events`,
          },
        ]);
      }
    }
    if (options.streamTypes === undefined && organizationId === undefined) {
      const claimed = new Set(registry.streamTypes);
      for (const streamType of await distinctStreamTypes(tx)) {
        if (claimed.has(streamType)) continue;
        record([
          {
            kind: 'unclaimed-stream-type',
            streamType,
            streamId: '*',
            field: null,
            row: 'unregistered',
            replay: 'not verified',
            firstDifferingEvent: null,
            detail: `the log holds '${streamType}' events but no registered aggregate claims that stream type (registered: ${[...claimed].join(', ')}); register its descriptor or side stream`,
          },
        ]);
      }
    }
  });
  report.ms = Date.now() - started;
  return report;
}

/** Rows no event explains (at most `limit`); with an organization, those whose row names it. */
async function rowsWithoutEvents(
  tx: SqlClient,
  model: StateModel,
  limit: number,
  organizationId: string | undefined,
): Promise<string[]> {
  const ids = await model.rowsWithoutEvents(tx, limit);
  if (organizationId === undefined || ids.length === 0) return ids;
  const rows = await model.loadRows(
    tx,
    ids.map((id) => model.rowKey(id)),
  );
  return ids.filter((id) => {
    const row = rows.get(model.rowKey(id));
    return row !== undefined && model.organizationOf(row.fields) === organizationId;
  });
}

/** Compares finished folds with their rows; returns the drifts of each drifted stream. */
async function compareFolds(tx: SqlClient, model: StateModel, folds: readonly Fold[]): Promise<Drift[][]> {
  if (folds.length === 0) return [];
  const rows = await model.loadRows(
    tx,
    folds.map((f) => model.rowKey(f.streamId)),
  );
  const drifted: Drift[][] = [];
  for (const fold of folds) {
    const base = { streamType: model.streamType, streamId: fold.streamId };
    const row = rows.get(model.rowKey(fold.streamId));
    if (fold.broken) {
      drifted.push([
        {
          ...base,
          kind: fold.broken.kind,
          field: null,
          row: row ? `version ${row.version}` : 'missing',
          replay: `stops at version ${fold.version}`,
          firstDifferingEvent: fold.broken.event,
          detail: fold.broken.detail,
        },
      ]);
      continue;
    }
    const exists = model.exists(fold.state);
    if (!row) {
      if (exists) {
        drifted.push([
          {
            ...base,
            kind: 'missing-row',
            field: null,
            row: 'missing',
            replay: `version ${fold.version}`,
            firstDifferingEvent: fold.first,
            detail: `stream has ${fold.events} event(s) but no ${model.table} row`,
          },
        ]);
      }
      continue;
    }
    const folded = exists ? model.fields(fold.state) : {};
    const fields = differingFields(row.fields, folded);
    const versionDiffers = row.version !== fold.version;
    if (fields.length === 0 && !versionDiffers) continue;
    drifted.push(
      await locate(tx, model, fold.streamId, row, folded, fields, versionDiffers ? fold.version : null),
    );
  }
  return drifted;
}

function differingFields(row: StateFields, folded: StateFields): string[] {
  const keys = new Set([...Object.keys(row), ...Object.keys(folded)]);
  return [...keys].filter((key) => !same(row[key], folded[key])).sort();
}

/**
 * Re-folds one drifted stream event by event and, per differing field, finds the event after the last
 * state whose value equalled the row's.
 */
async function locate(
  tx: SqlClient,
  model: StateModel,
  streamId: string,
  row: { fields: StateFields; version: number },
  folded: StateFields,
  fields: readonly string[],
  foldedVersion: number | null,
): Promise<Drift[]> {
  const events = await readStream(tx, model.streamType, streamId);
  const lastMatch = new Map<string, number>(fields.map((f) => [f, 0]));
  let state = model.initial();
  for (const [index, event] of events.entries()) {
    state = model.apply(state, event);
    const values = model.fields(state);
    for (const field of fields) if (same(values[field], row.fields[field])) lastMatch.set(field, index + 1);
  }
  const after = (matched: number): EventRef | null => {
    const event = events[Math.min(matched, events.length - 1)];
    return event ? ref(event) : null;
  };
  const drifts: Drift[] = fields.map((field) => {
    const matched = lastMatch.get(field) ?? 0;
    return {
      kind: 'field',
      streamType: model.streamType,
      streamId,
      field,
      row: row.fields[field],
      replay: folded[field],
      firstDifferingEvent: after(matched),
      detail:
        matched === 0
          ? 'no state in the stream ever had the stored value'
          : `the stored value is the state after version ${matched}`,
    };
  });
  if (foldedVersion !== null) {
    const matched = Math.max(0, Math.min(row.version, events.length));
    drifts.push({
      kind: 'field',
      streamType: model.streamType,
      streamId,
      field: 'version',
      row: row.version,
      replay: foldedVersion,
      firstDifferingEvent: after(matched),
      detail:
        row.version > foldedVersion
          ? `the row claims version ${row.version}; the stream ends at ${foldedVersion}`
          : `the row reflects version ${row.version}`,
    });
  }
  return drifts;
}
