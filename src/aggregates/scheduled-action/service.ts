/**
 * The scheduled-action library API: schedule, signal, cancel, fire now, reschedule, get, list, history,
 * signals and subjects; every call is one transaction through the command handler (invariant 1), on
 * database time (invariant 6). A wait and a signal for the same organization and correlation key take one
 * advisory lock first, so whichever commits second sees the other and no signal is lost, on PostgreSQL
 * alone. With queue dispatch an action due at once is claimed in the same transaction. ADR 0010.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  type ActionFilter,
  findPriorSignal,
  listActions,
  loadSubject,
  lockCorrelation,
  lockWaitsForSignal,
  type SubjectRecord,
  upsertSubject,
} from '../../adapters/postgres/scheduled-action-queries.js';
import type { ReceivedSignal } from '../../domain/action-signal.js';
import {
  type ExistingAction,
  parseScheduledActionCommand,
  type ScheduleAction,
  type ScheduledActionCommand,
} from '../../domain/scheduled-action.js';
import { validationErrorFrom } from '../../domain/validation.js';
import { NotFoundError } from '../../errors.js';
import type { CommandHandler } from '../../eventstore/command-handler.js';
import { readCurrentStream } from '../../eventstore/read-stream.js';
import type { Database } from '../../ports/database.js';
import type { EventMeta, StoredEvent } from '../../ports/events.js';
import { actionSignalAggregate, scheduledActionAggregate } from './descriptor.js';
import type { ActionSettings } from './settings.js';

type Times = Date | string;

/** scheduleAction's parameters: the ScheduleAction command without its envelope. */
export type ScheduleActionParams = Omit<
  ScheduleAction,
  'type' | 'now' | 'actionId' | 'priorSignal' | 'claimWith'
> & {
  actionId?: string;
};

export interface SignalParams {
  organizationId: string;
  correlationKey: string;
  name: string;
  payload?: Record<string, unknown>;
}

export interface SignalOutcome {
  signalId: string;
  /** Waits this signal unlocked. */
  unlocked: string[];
  /** Matching waits that refused it, with why (e.g. the deadline had passed). */
  refused: { actionId: string; reason: string }[];
}

/** A signal's parameters (the API's `POST /v1/signals` body is this without the organization). */
export const signalParams = z.strictObject({
  organizationId: z.string().trim().min(1, 'must not be empty').max(200),
  correlationKey: z.string().trim().min(1, 'must not be empty').max(500),
  name: z.string().trim().min(1, 'must not be empty').max(200),
  payload: z.record(z.string(), z.unknown()).optional(),
});

export interface ScheduledActionServiceDeps {
  db: Database;
  handler: CommandHandler;
  settings: Pick<ActionSettings, 'dispatch' | 'maxRetries' | 'signalLookbackMs'>;
}

export class ScheduledActionService {
  private readonly actions;
  private readonly signals;
  /** Claim in the same transaction when due at once (queue dispatch; in-process workers claim their own). */
  private readonly claimWith: 'queue' | undefined;

  constructor(private readonly deps: ScheduledActionServiceDeps) {
    this.actions = deps.handler.for(scheduledActionAggregate);
    this.signals = deps.handler.for(actionSignalAggregate);
    this.claimWith = deps.settings.dispatch === 'queue' ? 'queue' : undefined;
  }

  /**
   * Schedules an action (seed 002's ScheduleAction). A wait first looks for a matching signal received
   * within the lookback window; if there is one the wait is unlocked in the same transaction.
   */
  async schedule(params: ScheduleActionParams, meta?: EventMeta): Promise<ExistingAction> {
    const actionId = params.actionId ?? randomUUID();
    const draft = {
      maxRetries: this.deps.settings.maxRetries,
      ...params,
      type: 'ScheduleAction' as const,
      actionId,
    };
    // Validated before any lock: the wait's organization and key are what the lock is taken on.
    const checked = parseScheduledActionCommand({ ...draft, now: new Date() });
    if (checked.type !== 'ScheduleAction') throw new Error('unreachable');
    const { result, laterUnlock } = await this.deps.db.transaction(async (tx) => {
      let prior: ReceivedSignal | null = null;
      if (checked.wait) {
        await lockCorrelation(tx, checked.organizationId, checked.wait.correlationKey);
        prior = await findPriorSignal(
          tx,
          { organizationId: checked.organizationId, ...checked.wait },
          this.deps.settings.signalLookbackMs,
        );
      }
      const result = await this.actions.handleInTransaction(
        tx,
        actionId,
        (now): ScheduledActionCommand => ({
          ...draft,
          now,
          ...(prior
            ? { priorSignal: { signalId: prior.signalId, name: prior.name, receivedAt: prior.receivedAt } }
            : {}),
          ...(this.claimWith ? { claimWith: this.claimWith } : {}),
        }),
        // An id generated here is new: no look-up (a caller's id may exist: the decider refuses it).
        { ...(meta ? { meta } : {}), ...(params.actionId ? {} : { expectedVersion: 0 }) },
      );
      const laterUnlock = prior
        ? await this.signals.handleInTransaction(
            tx,
            prior.signalId,
            (now) => ({ type: 'RecordLaterUnlock', signalId: prior.signalId, actionId, now }),
            meta ? { meta } : {},
          )
        : null;
      return { result, laterUnlock };
    });
    this.actions.signalAfterCommit([result]);
    if (laterUnlock) this.signals.signalAfterCommit([laterUnlock]);
    return result.state as ExistingAction;
  }

  /**
   * Records a signal (seed 002's checkAndCompleteDelayWait) and, in the same transaction, unlocks every
   * pending wait of the organization and correlation key that lists its name and whose deadline has not
   * passed. A wait already unlocked, or claimed by its deadline, is not matched (one outcome each).
   */
  async signal(params: SignalParams, meta?: EventMeta): Promise<SignalOutcome> {
    const parsed = signalParams.safeParse(params);
    if (!parsed.success) throw validationErrorFrom('signal', params, parsed.error.issues);
    const signal = parsed.data;
    const signalId = randomUUID();
    const options = meta ? { meta } : {};
    const { unlocked, received } = await this.deps.db.transaction(async (tx) => {
      await lockCorrelation(tx, signal.organizationId, signal.correlationKey);
      const waits = (await lockWaitsForSignal(tx, signal)).map((w) => ({
        streamId: w.state.actionId,
        state: w.state,
        version: w.version,
      }));
      const unlocked = await this.actions.handleBatchInTransaction(
        tx,
        waits,
        (stream, now) => ({
          type: 'SignalAction',
          actionId: stream.streamId,
          signalId,
          name: signal.name,
          correlationKey: signal.correlationKey,
          now,
          ...(this.claimWith ? { claimWith: this.claimWith } : {}),
        }),
        options,
      );
      const received = await this.signals.handleInTransaction(
        tx,
        signalId,
        (now) => ({
          type: 'ReceiveSignal',
          signalId,
          now,
          organizationId: signal.organizationId,
          correlationKey: signal.correlationKey,
          name: signal.name,
          payload: signal.payload ?? {},
          unlocked: unlocked.results.map((r) => r.streamId),
          refused: unlocked.refused.map((r) => ({ actionId: r.streamId, reason: r.error.message })),
        }),
        { ...options, expectedVersion: 0 },
      );
      return { unlocked, received };
    });
    this.actions.signalAfterCommit(unlocked.results);
    this.signals.signalAfterCommit([received]);
    return {
      signalId,
      unlocked: unlocked.results.map((r) => r.streamId),
      refused: unlocked.refused.map((r) => ({ actionId: r.streamId, reason: r.error.message })),
    };
  }

  /** Cancels a pending or waiting action, with the reason (and the actor in `meta`). */
  cancel(actionId: string, reason: string, meta?: EventMeta) {
    return this.run(actionId, (now) => ({ type: 'CancelAction', actionId, reason, now }), meta);
  }

  /** Makes a pending or waiting action due now (a wait runs its main branch, as if signalled). */
  fireNow(actionId: string, reason?: string, meta?: EventMeta) {
    return this.run(
      actionId,
      (now) => ({
        type: 'FireActionNow',
        actionId,
        now,
        ...(reason ? { reason } : {}),
        ...(this.claimWith ? { claimWith: this.claimWith } : {}),
      }),
      meta,
    );
  }

  /** Moves a pending action's execute time (`executeAt`) or a waiting action's deadline (`expiresAt`). */
  reschedule(
    actionId: string,
    to: { executeAt?: Times; expiresAt?: Times },
    reason?: string,
    meta?: EventMeta,
  ) {
    return this.run(
      actionId,
      (now) => ({ type: 'RescheduleAction', actionId, now, ...to, ...(reason ? { reason } : {}) }),
      meta,
    );
  }

  /** Runs any scheduled-action command and returns the resulting state. */
  async run(actionId: string, makeCommand: (now: Date) => ScheduledActionCommand, meta?: EventMeta) {
    const result = await this.actions.handle(actionId, makeCommand, meta ? { meta } : {});
    return result.state as ExistingAction;
  }

  async get(actionId: string): Promise<ExistingAction> {
    const loaded = await scheduledActionAggregate.store.load(this.deps.db, actionId);
    if (!loaded || loaded.state.status === 'NONE')
      throw new NotFoundError(`scheduled action ${actionId} not found`);
    return loaded.state;
  }

  list(filter: ActionFilter = {}): Promise<ExistingAction[]> {
    return listActions(this.deps.db, filter);
  }

  history(actionId: string, until?: Date): Promise<StoredEvent[]> {
    return readCurrentStream(this.deps.db, scheduledActionAggregate, actionId, until ? { until } : {});
  }

  async getSignal(signalId: string): Promise<ReceivedSignal> {
    const loaded = await actionSignalAggregate.store.load(this.deps.db, signalId);
    if (!loaded || loaded.state.status === 'NONE') throw new NotFoundError(`signal ${signalId} not found`);
    return loaded.state;
  }

  signalHistory(signalId: string): Promise<StoredEvent[]> {
    return readCurrentStream(this.deps.db, actionSignalAggregate, signalId);
  }

  /** Creates or replaces a subject's attributes (what conditions are evaluated against at fire time). */
  upsertSubject(
    organizationId: string,
    subjectId: string,
    attributes: Record<string, unknown>,
  ): Promise<SubjectRecord> {
    const parsed = z
      .strictObject({
        organizationId: z.string().trim().min(1).max(200),
        subjectId: z.string().trim().min(1).max(200),
        attributes: z.record(z.string(), z.unknown()),
      })
      .safeParse({ organizationId, subjectId, attributes });
    if (!parsed.success)
      throw validationErrorFrom('subject', { organizationId, subjectId }, parsed.error.issues);
    return upsertSubject(
      this.deps.db,
      parsed.data.organizationId,
      parsed.data.subjectId,
      parsed.data.attributes,
    );
  }

  async getSubject(organizationId: string, subjectId: string): Promise<SubjectRecord> {
    const found = await loadSubject(this.deps.db, organizationId, subjectId);
    if (!found) throw new NotFoundError(`subject ${subjectId} of organization ${organizationId} not found`);
    return found;
  }
}
