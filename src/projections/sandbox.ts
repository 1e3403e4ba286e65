/**
 * The point-in-time sandbox (`herald replay --until <time> --into <schema>`): every state table as it
 * was at a time, rebuilt from the event log into a separate, new schema for SQL investigation, without
 * touching the live tables. For each registered stream type with a state model it creates the
 * table LIKE the live one, streams that type's events recorded up to the time through a cursor in
 * stream order (bounded memory, like verify), folds each stream with the pure `evolve` (invariant 8)
 * and inserts the states in batches. Views `event` and `publish_receipt` show the log up to the same
 * time. All in one repeatable-read transaction: the sandbox appears whole, or not at all.
 */
import { SNAPSHOT_READ_WRITE } from '../adapters/postgres/cursor-queries.js';
import { scanStreams } from '../adapters/postgres/event-queries.js';
import {
  commentOnSchema,
  createSandboxSchema,
  createTableLike,
  createViewUntil,
  sandboxIdentifier,
  setLocalSearchPath,
} from '../adapters/postgres/sandbox-queries.js';
import { errorMessage, ValidationError } from '../errors.js';
import type { Database } from '../ports/database.js';
import { parseInstant } from './replay.js';
import type { StateModelCatalogue } from './state-models.js';

export interface SandboxOptions {
  /** ISO 8601 with Z or an offset: events recorded up to and including this instant. */
  until: string;
  /** The new schema to create. */
  into: string;
  streamTypes?: readonly string[];
  batchSize?: number;
  /** States inserted per statement. */
  insertEvery?: number;
}

export interface SandboxTable {
  streamType: string;
  table: string;
  events: number;
  rows: number;
  /** Streams whose events could not be folded (corrupt log): left out, listed here. */
  skipped: { streamId: string; version: number; error: string }[];
}

export interface SandboxResult {
  schema: string;
  until: string;
  tables: SandboxTable[];
  ms: number;
}

export async function buildSandbox(
  db: Database,
  registry: StateModelCatalogue,
  options: SandboxOptions,
): Promise<SandboxResult> {
  const started = Date.now();
  const until = parseInstant(options.until, '--until');
  sandboxIdentifier(options.into);
  if (options.into === db.schema) {
    throw new ValidationError(`--into must name a new schema, not Herald's own (${db.schema})`, {
      schema: options.into,
    });
  }
  const models = (options.streamTypes ?? [...registry.stateModels.keys()]).map((t) =>
    registry.stateModelFor(t),
  );
  const batchSize = options.batchSize ?? 10_000;
  const insertEvery = options.insertEvery ?? 1_000;

  const tables = await db.transaction(async (tx) => {
    await tx.query(SNAPSHOT_READ_WRITE);
    await createSandboxSchema(tx, options.into);
    for (const model of models) await tx.query(createTableLike(options.into, db.schema, model.table));
    await tx.query(setLocalSearchPath(options.into, db.schema));
    const tables: SandboxTable[] = [];
    for (const model of models) {
      const table: SandboxTable = {
        streamType: model.streamType,
        table: model.table,
        events: 0,
        rows: 0,
        skipped: [],
      };
      let current: { streamId: string; state: unknown; version: number; failed: boolean } | null = null;
      let ready: { streamId: string; state: unknown; version: number }[] = [];
      const finish = () => {
        if (current && !current.failed && model.exists(current.state)) {
          ready.push({ streamId: current.streamId, state: current.state, version: current.version });
        }
      };
      const insert = async () => {
        if (ready.length === 0) return;
        const rows = ready;
        ready = [];
        await model.insertRows(tx, rows);
        table.rows += rows.length;
      };
      await scanStreams(tx, { streamType: model.streamType, until, batchSize }, async (events) => {
        for (const event of events) {
          table.events++;
          if (current?.streamId !== event.streamId) {
            finish();
            current = { streamId: event.streamId, state: model.initial(), version: 0, failed: false };
          }
          const fold: { streamId: string; state: unknown; version: number; failed: boolean } = current;
          if (fold.failed) continue;
          try {
            fold.state = model.apply(fold.state, event);
            fold.version = event.version;
          } catch (error) {
            fold.failed = true;
            table.skipped.push({
              streamId: fold.streamId,
              version: event.version,
              error: errorMessage(error),
            });
          }
        }
        if (ready.length >= insertEvery) await insert();
      });
      finish();
      await insert();
      tables.push(table);
    }
    await tx.query(createViewUntil(options.into, db.schema, 'event', until));
    await tx.query(createViewUntil(options.into, db.schema, 'publish_receipt', until));
    await tx.query(
      commentOnSchema(
        options.into,
        `Herald sandbox: state tables as of ${until}, folded from ${db.schema}.event (herald replay --until)`,
      ),
    );
    return tables;
  });
  return { schema: options.into, until, tables, ms: Date.now() - started };
}
