/**
 * The fenced handler: invariant 5's destination re-check, once for every consumer that acts on a claim. It
 * loads the message's stream and accepts the work only in the claimed state with the message's epoch, as
 * the descriptor declares its claim; otherwise it records a quiet discard on a side stream keyed by the
 * message id. Accepted work runs in the inbox transaction (invariant 4) under a heartbeat, its outcome a
 * command in the same transaction; a claim revoked meanwhile rolls the effect back to a savepoint and
 * discards the message. The batch form (`effectMany`) takes several messages in one transaction with their
 * rows locked, so it needs no heartbeat: stale recovery skips locked rows. ADR 0009, ADR 0020.
 */

import { appendEvents } from '../adapters/postgres/event-queries.js';
import type { DomainEvent } from '../domain/decider.js';
import { errorMessage, IllegalStateError, PermanentError } from '../errors.js';
import type { AggregateDescriptor, ClaimDeclaration } from '../eventstore/aggregate.js';
import type { CommandHandler } from '../eventstore/command-handler.js';
import type { Logger } from '../logger.js';
import { inSpan } from '../observability/tracing.js';
import type { SqlClient } from '../ports/database.js';
import type { EventMeta, NewEvent } from '../ports/events.js';
import type {
  BatchHandler,
  BatchingHandler,
  ConsumedMessage,
  Handler,
  HandlerOutcome,
} from './delivery-policy.js';
import { withHeartbeat } from './heartbeat.js';

/** The claim a message belongs to. */
export interface ClaimRef {
  streamId: string;
  epoch: number;
}

export interface EffectContext<State, Payload> {
  message: ConsumedMessage<Payload>;
  claim: ClaimRef;
  /** The claimed state, as the re-check saw it. */
  state: State;
  /** The inbox transaction: effects written here commit with the inbox row and the completion. */
  tx: SqlClient;
  log: Logger;
}

export interface FencedHandlerDefinition<State, Command, Event extends DomainEvent, Payload, Result = void> {
  /** The consumer's name: the actor of every event it appends. */
  consumer: string;
  /** The claimed aggregate: its descriptor's `claim` says what the re-check accepts. */
  aggregate: AggregateDescriptor<State, Command, Event> & { readonly claim: ClaimDeclaration<State> };
  /** The work; what it returns is handed to `complete`. PermanentError → `fail`; other errors → `retry`. */
  effect(context: EffectContext<State, Payload>): Promise<Result>;
  /**
   * The effect for several accepted messages at once (the batch form), optionally returning each one's
   * result (in order) for `complete`; throw and the batch is retried one by one.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: an effect without per-message results resolves to nothing.
  effectMany?(contexts: readonly EffectContext<State, Payload>[]): Promise<void | readonly Result[]>;
  /** Refreshes the claim during a long effect (omit for effects that never outlive the stale window). */
  heartbeat?(claim: ClaimRef, now: Date): Command;
  /** The effect succeeded (in the batch form `result` is what effectMany returned for it, if anything). */
  complete(claim: ClaimRef, now: Date, result?: Result): Command;
  fail(claim: ClaimRef, reason: string, now: Date, error: Error): Command;
  /**
   * A transient effect failure as a command (e.g. a retry the aggregate schedules itself, or a final
   * failure once its attempts are used up) instead of the toolkit delivering the message again.
   */
  retry?(claim: ClaimRef, error: Error, now: Date, state: State): Command;
}

/** The claim a message of `declaration`'s aggregate carries: its stream id field and `epoch`. */
export function claimOf<State>(declaration: ClaimDeclaration<State>, payload: unknown): ClaimRef {
  const fields = payload as Record<string, unknown>;
  return { streamId: String(fields[declaration.idField]), epoch: Number(fields.epoch) };
}

const statusOf = (state: unknown) => (state as { status: string }).status;
const epochIn = <State>(declaration: ClaimDeclaration<State>, state: State) =>
  declaration.epochOf ? declaration.epochOf(state) : (state as { claimEpoch: number }).claimEpoch;

/** Null while `state` holds the live claim `claim` was produced by; otherwise why not. */
export function claimRefusal<State>(
  aggregate: Pick<AggregateDescriptor<State, unknown, DomainEvent>, 'stateTable'> & {
    readonly claim: ClaimDeclaration<State>;
  },
  state: State | undefined,
  { epoch }: ClaimRef,
): string | null {
  const { claim } = aggregate;
  if (state === undefined || !aggregate.stateTable.exists(state)) return `${claim.noun} not found`;
  const status = statusOf(state);
  if (!claim.liveStatuses.includes(status)) {
    return `${claim.noun} is ${status}, not ${claim.liveLabel ?? claim.liveStatuses.join(' or ')}`;
  }
  const live = epochIn(claim, state);
  if (live !== epoch) return `stale epoch ${epoch}: the live claim is epoch ${live}`;
  return null;
}

/** The data of a discard record: the claim, the reason, and the state the re-check saw. */
export function discardData<State>(
  aggregate: Pick<AggregateDescriptor<State, unknown, DomainEvent>, 'stateTable'> & {
    readonly claim: ClaimDeclaration<State>;
  },
  payload: unknown,
  state: State | undefined,
  reason: string,
): Record<string, unknown> {
  const { claim } = aggregate;
  const fields = payload as Record<string, unknown>;
  const exists = state !== undefined && aggregate.stateTable.exists(state);
  return {
    [claim.idField]: fields[claim.idField],
    ...Object.fromEntries((claim.discard.keep ?? []).map((name) => [name, fields[name]])),
    epoch: fields.epoch,
    reason,
    [`${claim.noun}Status`]: state === undefined ? null : statusOf(state),
    [`${claim.noun}Epoch`]: exists ? epochIn(claim, state) : null,
  };
}

export interface FencedHandlerDeps {
  handler: CommandHandler;
  logger: Logger;
  /** Heartbeat interval while an effect runs (seed 000: 5 minutes). */
  heartbeatMs?: number;
}

/** Seed 000: the delivery consumer refreshes claimed_at every 5 minutes during a send. */
export const DEFAULT_HEARTBEAT_MS = 5 * 60_000;

const EFFECT_SAVEPOINT = 'herald_fenced_effect';

export function fencedHandler<State, Command, Event extends DomainEvent, Payload, Result = void>(
  definition: FencedHandlerDefinition<State, Command, Event, Payload, Result>,
  deps: FencedHandlerDeps,
): Handler<Payload> | BatchingHandler<Payload> {
  const { aggregate } = definition;
  const commands = deps.handler.for(aggregate);
  const claimOfMessage = (payload: Payload) => claimOf(aggregate.claim, payload);
  const refusal = (state: State | undefined, claim: ClaimRef) => claimRefusal(aggregate, state, claim);
  const heartbeatMs = deps.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const metaOf = (message: ConsumedMessage<Payload>): EventMeta => ({
    ...(message.correlationId ? { correlationId: message.correlationId } : {}),
    causationId: message.messageId,
    actor: definition.consumer,
  });
  const discardEvent = (
    message: ConsumedMessage<Payload>,
    state: State | undefined,
    reason: string,
  ): NewEvent => ({
    streamType: aggregate.claim.discard.streamType,
    streamId: message.messageId,
    version: 1,
    type: aggregate.claim.discard.eventType,
    data: discardData(aggregate, message.payload, state, reason),
    meta: metaOf(message),
  });
  const logFor = (message: ConsumedMessage<Payload>, claim: ClaimRef) =>
    deps.logger.child({
      consumer: definition.consumer,
      messageId: message.messageId,
      correlationId: message.correlationId,
      aggregateId: claim.streamId,
      epoch: claim.epoch,
    });

  const discard = async (
    tx: SqlClient,
    message: ConsumedMessage<Payload>,
    state: State | undefined,
    reason: string,
    log: Logger,
  ) => {
    await appendEvents(tx, [discardEvent(message, state, reason)]);
    log.info({ reason }, 'message discarded at the destination re-check');
    return { discard: reason };
  };

  const single: Handler<Payload> = async (message, tx) => {
    const claim = claimOfMessage(message.payload);
    const log = logFor(message, claim);
    const meta = metaOf(message);
    const state = (await aggregate.store.load(tx, claim.streamId))?.state;
    const refused = refusal(state, claim);
    if (refused !== null || state === undefined) {
      return discard(tx, message, state, refused ?? 'not found', log);
    }

    await tx.query(`savepoint ${EFFECT_SAVEPOINT}`);
    let failure: { kind: 'fail' | 'retry'; error: Error } | null = null;
    let result: Result | undefined;
    try {
      const work = async () => {
        result = await inSpan(`effect ${definition.consumer}`, {}, () =>
          definition.effect({ message, claim, state, tx, log }),
        );
      };
      const { heartbeat } = definition;
      if (heartbeat) {
        await withHeartbeat(
          heartbeatMs,
          async () => {
            await commands.handle(claim.streamId, (now) => heartbeat(claim, now), { meta });
          },
          work,
          { onError: (error) => log.warn({ err: error }, 'heartbeat failed') },
        );
      } else {
        await work();
      }
    } catch (error) {
      const permanent = error instanceof PermanentError;
      // Transient without a retry command: the toolkit delivers the message again (its retry queue).
      if (!permanent && !definition.retry) throw error;
      failure = {
        kind: permanent ? 'fail' : 'retry',
        error: error instanceof Error ? error : new Error(String(error)),
      };
      await tx.query(`rollback to savepoint ${EFFECT_SAVEPOINT}`);
    }

    try {
      const outcome = await commands.handleInTransaction(
        tx,
        claim.streamId,
        (now) =>
          failure === null
            ? definition.complete(claim, now, result)
            : failure.kind === 'fail'
              ? definition.fail(claim, errorMessage(failure.error), now, failure.error)
              : definition.retry!(claim, failure.error, now, state),
        { meta },
      );
      message.afterCommit(() => commands.signalAfterCommit([outcome]));
    } catch (error) {
      if (!(error instanceof IllegalStateError)) throw error;
      // The claim was revoked while the effect ran: nothing of it may stay.
      await tx.query(`rollback to savepoint ${EFFECT_SAVEPOINT}`);
      const current = (await aggregate.store.load(tx, claim.streamId))?.state;
      return discard(tx, message, current, refusal(current, claim) ?? errorMessage(error), log);
    }
    if (failure === null) log.info('claim completed at the destination');
    else if (failure.kind === 'fail')
      log.warn({ err: failure.error }, 'effect failed permanently: claim failed');
    else log.warn({ err: failure.error }, 'effect failed; the aggregate decides the retry');
    return 'processed';
  };

  const { effectMany } = definition;
  const { loadMany } = aggregate.store;
  if (!effectMany || !loadMany) return single;

  const batch: BatchHandler<Payload> = async (messages, tx) => {
    const claims = messages.map((m) => claimOfMessage(m.payload));
    // Two messages for one stream: the second must see the first's outcome, so one at a time.
    if (new Set(claims.map((c) => c.streamId)).size !== claims.length) return null;
    const loaded = await loadMany(
      tx,
      claims.map((c) => c.streamId),
      { forUpdate: true },
    );
    const outcomes: HandlerOutcome[] = [];
    const discards: NewEvent[] = [];
    const accepted: (EffectContext<State, Payload> & { version: number })[] = [];
    for (const [index, message] of messages.entries()) {
      const claim = claims[index]!;
      const row = loaded.get(claim.streamId);
      const reason = refusal(row?.state, claim) ?? (row ? null : 'not found');
      if (reason !== null || !row) {
        discards.push(discardEvent(message, row?.state, reason ?? 'not found'));
        outcomes.push({ discard: reason ?? 'not found' });
        logFor(message, claim).info({ reason }, 'message discarded at the destination re-check');
      } else {
        accepted.push({
          message,
          claim,
          state: row.state,
          version: row.version,
          tx,
          log: logFor(message, claim),
        });
        outcomes.push('processed');
      }
    }
    if (accepted.length > 0) {
      const results = await effectMany(accepted);
      const byStream = new Map(
        accepted.map((a, index) => [a.claim.streamId, { ...a, result: results?.[index] }]),
      );
      const completed = await commands.handleBatchInTransaction(
        tx,
        accepted.map((a) => ({ streamId: a.claim.streamId, state: a.state, version: a.version })),
        (stream, now) => {
          const { claim, result } = byStream.get(stream.streamId)!;
          return definition.complete(claim, now, result);
        },
        { metaFor: (stream) => metaOf(byStream.get(stream.streamId)!.message) },
      );
      // The streams were locked and re-checked: a refusal here is a bug, and the batch goes one by one.
      if (completed.refused.length > 0) throw completed.refused[0]!.error;
      messages[0]!.afterCommit(() => commands.signalAfterCommit(completed.results));
      for (const a of accepted) a.log.info('claim completed at the destination');
    }
    await appendEvents(tx, discards);
    return outcomes;
  };
  return Object.assign(single, { batch });
}
