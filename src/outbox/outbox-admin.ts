/**
 * Operator commands on the outbox (ADR 0007), behind `herald outbox …`:
 * - `parked`: ordered keys held back by a dead head row, oldest first, with how many rows wait.
 * - `requeue <id>`: a dead row goes back to pending, due now, attempts reset; its key stays ordered
 *   behind it, so it is published first.
 * - `skip <id> [--reason=…]`: a dead row becomes `skipped` (never published, never re-queued; who and
 *   why are kept in last_error) and the next row of its key becomes the head, so the key drains.
 * Each statement is guarded (only a dead row moves), so a command that races the relay's recovery or
 * another operator changes nothing twice. Afterwards relays are woken by NOTIFY (they would also find
 * the work on their next poll), and, when the organization is known (the API), its dashboards.
 */
import {
  listParkedKeys,
  notifyChannel,
  type ParkedKey,
  type SkippedRow,
  skipDead,
  wakeKeyHeads,
} from '../adapters/postgres/outbox-order-queries.js';
import { requeueDead } from '../adapters/postgres/outbox-queries.js';
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';
import { channels, organizationPayloads } from '../ports/wakeups.js';

/**
 * Wakes the relays and, given the organization whose rows moved, tells its live streams the outbox
 * changed (a change notification names its organization: no other organization hears of it).
 */
export async function notifyOutboxMoved(db: Database, organizationId: string | undefined): Promise<void> {
  await notifyChannel(db, channels.outbox(db.schema));
  if (organizationId === undefined) return;
  for (const payload of organizationPayloads([organizationId])) {
    await notifyChannel(db, channels.changed(db.schema, 'outbox'), payload);
  }
}

export async function parkedKeys(db: Database, limit = 100): Promise<ParkedKey[]> {
  return listParkedKeys(db, limit);
}

/**
 * Re-queues a dead row (with `organizationId`: only a row of that organization, the API's tenancy).
 * False when the row does not exist or is not dead.
 */
export async function requeueRow(
  db: Database,
  params: { id: number; actor: string; organizationId?: string; logger?: Logger },
): Promise<boolean> {
  const [requeued] = await requeueDead(db, [params.id], params.organizationId ?? null);
  if (requeued === undefined) return false;
  params.logger?.info({ outboxId: params.id, actor: params.actor }, 'dead outbox row re-queued by operator');
  await notifyOutboxMoved(db, params.organizationId);
  return true;
}

/**
 * Skips a dead row (with `organizationId`: only a row of that organization) and wakes the next row of
 * its key. Null when the row does not exist or is not dead.
 */
export async function skipRow(
  db: Database,
  params: { id: number; actor: string; reason: string; organizationId?: string; logger?: Logger },
): Promise<SkippedRow | null> {
  const [skipped] = await skipDead(db, { ...params, ids: [params.id] });
  if (!skipped) return null;
  if (skipped.ordered && skipped.partitionKey !== null) {
    await wakeKeyHeads(db, [
      { sink: skipped.sink, destination: skipped.destination, partitionKey: skipped.partitionKey },
    ]);
  }
  params.logger?.warn(
    {
      outboxId: skipped.id,
      messageId: skipped.messageId,
      destination: skipped.destination,
      partitionKey: skipped.partitionKey,
      actor: params.actor,
      reason: params.reason,
    },
    'dead outbox row skipped by operator; it will never be published',
  );
  await notifyOutboxMoved(db, params.organizationId);
  return skipped;
}

export const OUTBOX_USAGE = `usage: herald outbox parked [--json] [--limit=N]
       herald outbox requeue <id>
       herald outbox skip <id> [--reason=<why>] [--actor=<who>]`;

export interface OutboxCommandContext {
  db: Database;
  logger: Logger;
  /** Positionals after `outbox`. */
  args: readonly string[];
  options: Record<string, string | boolean | undefined>;
  /** Recorded as the actor when --actor is not given. */
  defaultActor: string;
  write: (text: string) => void;
}

/** Runs one `herald outbox …` command; returns the exit code (0 ok, 1 nothing done, 2 usage). */
export async function runOutboxCommand(context: OutboxCommandContext): Promise<number> {
  const [command, idText, ...rest] = context.args;
  const actor = typeof context.options.actor === 'string' ? context.options.actor : context.defaultActor;
  if (command === 'parked') {
    const limit = typeof context.options.limit === 'string' ? Number(context.options.limit) : 100;
    if (!Number.isInteger(limit) || limit < 1) return usage(context, '--limit must be a positive integer');
    const parked = await parkedKeys(context.db, limit);
    if (context.options.json === true) {
      context.write(`${JSON.stringify(parked)}\n`);
    } else if (parked.length === 0) {
      context.write('no parked keys\n');
    } else {
      for (const key of parked) {
        context.write(
          `${key.sink}:${key.destination} key=${key.partitionKey} head=${key.id} waiting=${key.waiting} ` +
            `attempts=${key.attempts} dead_at=${key.deadAt.toISOString()} error=${JSON.stringify(key.lastError)}\n`,
        );
      }
    }
    return 0;
  }
  if (command !== 'requeue' && command !== 'skip') return usage(context);
  const id = Number(idText);
  if (!Number.isSafeInteger(id) || id < 1) return usage(context, 'an outbox row id is required');
  if (command === 'requeue') {
    const done = await requeueRow(context.db, { id, actor, logger: context.logger });
    context.write(done ? `re-queued ${id}\n` : `outbox row ${id} is not dead; nothing re-queued\n`);
    return done ? 0 : 1;
  }
  const reason =
    typeof context.options.reason === 'string'
      ? context.options.reason
      : rest.length > 0
        ? rest.join(' ')
        : 'no reason given';
  const skipped = await skipRow(context.db, { id, actor, reason, logger: context.logger });
  context.write(
    skipped
      ? `skipped ${id} (${skipped.sink}:${skipped.destination} key=${skipped.partitionKey ?? '-'})\n`
      : `outbox row ${id} is not dead; nothing skipped\n`,
  );
  return skipped ? 0 : 1;
}

function usage(context: OutboxCommandContext, problem?: string): number {
  context.write(`${problem ? `${problem}\n` : ''}${OUTBOX_USAGE}\n`);
  return 2;
}
