/**
 * The ActionSignal aggregate: one stream per signal received (seed 002's tracking click), recorded
 * durably in the transaction that unlocked the waits it matched. Its state row is the lookback source:
 * a wait saved after its signal finds it there and is unlocked at scheduling (no lost early signal).
 * It records what the signal did: the waits it unlocked when it arrived, the ones that refused it (a
 * deadline already passed, another signal first), and waits it unlocked later from the lookback window.
 * Pure decider; invariant 8 (the row is the fold of the stream).
 */
import { z } from 'zod';
import { IllegalStateError } from '../errors.js';
import { assertNever, type Decider } from './decider.js';
import { instantInput, storedInstant } from './time.js';
import { validationErrorFrom } from './validation.js';

export const ACTION_SIGNAL_STREAM_TYPE = 'action_signal';

const identifier = z.string().trim().min(1, 'must not be empty').max(200);
const refusal = z.object({ actionId: z.uuid(), reason: z.string().min(1) });

const receiveSignal = z.strictObject({
  type: z.literal('ReceiveSignal'),
  signalId: z.uuid().transform((id) => id.toLowerCase()),
  now: instantInput,
  organizationId: identifier,
  correlationKey: z.string().trim().min(1, 'must not be empty').max(500),
  name: identifier,
  payload: z.record(z.string(), z.unknown()).default({}),
  unlocked: z.array(z.uuid()),
  refused: z.array(refusal),
});

const recordLaterUnlock = z.strictObject({
  type: z.literal('RecordLaterUnlock'),
  signalId: z.uuid().transform((id) => id.toLowerCase()),
  now: instantInput,
  actionId: z.uuid(),
});

const commandSchema = z.discriminatedUnion('type', [receiveSignal, recordLaterUnlock]);
export type ActionSignalCommand = z.input<typeof commandSchema>;

const signalReceived = z.object({
  type: z.literal('SignalReceived'),
  data: z.object({
    signalId: z.uuid(),
    organizationId: z.string().min(1),
    correlationKey: z.string().min(1),
    name: z.string().min(1),
    payload: z.record(z.string(), z.unknown()),
    /** Waits this signal unlocked when it arrived. */
    unlocked: z.array(z.uuid()),
    /** Matching waits that refused it, with why (deadline passed, already unlocked). */
    refused: z.array(refusal),
    receivedAt: storedInstant,
  }),
});

/** A wait saved after the signal, within the lookback window, was unlocked by it at scheduling. */
const signalUnlockedLaterWait = z.object({
  type: z.literal('SignalUnlockedLaterWait'),
  data: z.object({ actionId: z.uuid(), at: storedInstant }),
});

const eventSchema = z.discriminatedUnion('type', [signalReceived, signalUnlockedLaterWait]);
export type ActionSignalEvent = z.infer<typeof eventSchema>;

export function parseActionSignalEvent(raw: unknown): ActionSignalEvent {
  const result = eventSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('action signal event', raw, result.error.issues);
}

export interface ReceivedSignal {
  readonly status: 'received';
  readonly signalId: string;
  readonly organizationId: string;
  readonly correlationKey: string;
  readonly name: string;
  readonly payload: Readonly<Record<string, unknown>>;
  readonly unlocked: readonly string[];
  readonly refused: readonly { readonly actionId: string; readonly reason: string }[];
  /** Waits saved later that this signal unlocked from the lookback window. */
  readonly unlockedLater: readonly string[];
  readonly receivedAt: string;
}
export type ActionSignalState = { readonly status: 'NONE' } | ReceivedSignal;

export function decideActionSignal(
  command: ActionSignalCommand,
  state: ActionSignalState,
): ActionSignalEvent[] {
  const parsed = commandSchema.safeParse(command);
  if (!parsed.success) throw validationErrorFrom('action signal command', command, parsed.error.issues);
  const c = parsed.data;
  switch (c.type) {
    case 'ReceiveSignal': {
      if (state.status !== 'NONE') throw illegal(c.type, c.signalId, 'it was already received');
      const { type: _type, now, ...data } = c;
      return [{ type: 'SignalReceived', data: { ...data, receivedAt: now } }];
    }
    case 'RecordLaterUnlock': {
      if (state.status === 'NONE') throw illegal(c.type, c.signalId, 'no such signal');
      if (state.unlocked.includes(c.actionId) || state.unlockedLater.includes(c.actionId)) {
        throw illegal(c.type, c.signalId, `it already unlocked action ${c.actionId}`);
      }
      return [{ type: 'SignalUnlockedLaterWait', data: { actionId: c.actionId, at: c.now } }];
    }
    default:
      return assertNever(c, 'action signal command');
  }
}

export function evolveActionSignal(state: ActionSignalState, event: ActionSignalEvent): ActionSignalState {
  switch (event.type) {
    case 'SignalReceived':
      if (state.status !== 'NONE') throw illegal(event.type, event.data.signalId, 'it was already received');
      return { status: 'received', ...event.data, unlockedLater: [] };
    case 'SignalUnlockedLaterWait':
      if (state.status === 'NONE') throw illegal(event.type, '(new)', 'no such signal');
      return { ...state, unlockedLater: [...state.unlockedLater, event.data.actionId] };
    default:
      return assertNever(event, 'action signal event');
  }
}

function illegal(what: string, signalId: string, why: string): IllegalStateError {
  return new IllegalStateError(`cannot ${what} for signal ${signalId}: ${why}`, { command: what, signalId });
}

export const actionSignalDecider: Decider<ActionSignalState, ActionSignalCommand, ActionSignalEvent> = {
  decide: decideActionSignal,
  evolve: evolveActionSignal,
  initialState: () => ({ status: 'NONE' }),
};
