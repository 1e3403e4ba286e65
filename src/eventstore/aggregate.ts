/**
 * The aggregate descriptor: everything Herald's generic machinery needs to know about one kind of
 * stream, said once. The command handler uses the decider, the state store (the inline projection of
 * invariant 1), the messages its events cause and when a state is due; replay, verify, the sandbox and
 * export use the state table mapping (invariant 8: folding a stream through `evolve` gives its row).
 * Sweepers, consumers, topology and projections are registered next to it (registry.ts), so a new
 * aggregate is a decider, this descriptor, its queries, a migration and one registry line.
 */
import type { Decider, DomainEvent } from '../domain/decider.js';
import type { EventSchemas } from '../domain/event-schemas.js';
import type { OutboxMessageSpec } from '../outbox/outbox-writer.js';
import type { StateStore, StateTableMapping } from '../ports/state-store.js';
import type { HeraldConfig } from '../settings/core.js';

/** A stream loaded (and locked) by a sweep query, ready for a batch of commands. */
export interface LoadedStream<State> {
  streamId: string;
  state: State;
  version: number;
}

export interface MessageContext<State, Event> {
  streamId: string;
  event: Event;
  /** The state right after the event. */
  state: State;
  version: number;
  /**
   * The configuration of the process writing the event (its command handler's), for messages whose
   * destination is a deployment setting (e.g. `HERALD_SMS_SINK`); undefined for a handler built without
   * one (tests, library callers), which then get the setting's default.
   */
  config?: HeraldConfig | undefined;
}

/** What the command handler needs: one transaction per transition (invariant 1). */
export interface Aggregate<State, Command, Event extends DomainEvent> {
  readonly streamType: string;
  readonly decider: Decider<State, Command, Event>;
  readonly store: StateStore<State>;
  /** Messages an event causes, given the state right after it (written in the same transaction). */
  readonly messagesFor?: (context: MessageContext<State, Event>) => OutboxMessageSpec[] | undefined;
  /**
   * When this state is next due for a sweeper (an ISO time; one in the past is due now), or null. After
   * a commit leaves a state due within the scanners' poll interval, the command handler wakes them.
   */
  readonly dueAt?: (state: State) => string | null;
  /**
   * The organization a state belongs to (tenancy: recorded on the outbox rows its events cause, so the
   * API shows an organization only its own). Default: the state's `organizationId` field, which every
   * Herald aggregate has; null when it has none.
   */
  readonly organizationOf?: (state: State) => string | null;
  /**
   * The event schema versions this aggregate reads and writes, with the upcasters between them
   * (ADR 0039). Absent: every event type at version 1. Every reader of the log applies them.
   */
  readonly events?: EventSchemas;
}

/** The organization of a state: the descriptor's `organizationOf`, else its `organizationId` field. */
export function organizationOf<State>(
  aggregate: Pick<Aggregate<State, unknown, DomainEvent>, 'organizationOf'>,
  state: State,
): string | null {
  if (aggregate.organizationOf) return aggregate.organizationOf(state);
  const id = (state as { organizationId?: unknown } | null)?.organizationId;
  return typeof id === 'string' ? id : null;
}

/**
 * How an aggregate's claims are fenced (invariant 5), declared once: which states hold a live claim,
 * the claim's epoch, and where a destination records a message it refuses. The fenced handler
 * (src/worker/fenced-handler.ts) derives its re-check, its refusal reasons and its discard record from
 * this; the registry derives the discard side stream.
 */
export interface ClaimDeclaration<State> {
  /** How reasons and discard records name the aggregate: `campaign`, `action`, `run`. */
  readonly noun: string;
  /** The message payload's field holding the stream id (`campaignId`); its epoch is `epoch`. */
  readonly idField: string;
  /** Statuses in which the claim is live: its messages are accepted only then (and with its epoch). */
  readonly liveStatuses: readonly string[];
  /** How a refusal names the live state (default: the live statuses joined with "or"). */
  readonly liveLabel?: string;
  /** The live claim's epoch in a state (default: its `claimEpoch` field). */
  readonly epochOf?: (state: State) => number;
  /** A refused message is recorded as one `eventType` event on `<streamType>/<message id>`. */
  readonly discard: {
    readonly streamType: string;
    readonly eventType: string;
    /** What the side stream holds (`herald verify` lists it). */
    readonly description: string;
    /** Payload fields the record keeps besides the stream id and epoch (e.g. a run's `jobId`). */
    readonly keep?: readonly string[];
  };
}

export interface AggregateDescriptor<State, Command, Event extends DomainEvent>
  extends Aggregate<State, Command, Event> {
  readonly stateTable: StateTableMapping<State, Event>;
  /** Present when the aggregate is claimed and its claim's messages are fenced at a destination. */
  readonly claim?: ClaimDeclaration<State>;
}

/** A descriptor whose claim is declared (what the fenced handler accepts). */
export type ClaimedAggregate<State, Command, Event extends DomainEvent> = AggregateDescriptor<
  State,
  Command,
  Event
> & { readonly claim: ClaimDeclaration<State> };
