/**
 * The Decider contract (Emmett style): pure functions, no I/O, no clock reads. Time enters through
 * the command (`now`, read from the database by the command handler: invariant 6). Replaying a
 * stream's events through `evolve` from `initialState()` must give the stored state (invariant 8).
 */
export interface DomainEvent<Type extends string = string, Data = unknown> {
  readonly type: Type;
  readonly data: Data;
}

export interface Decider<State, Command, Event extends DomainEvent> {
  /** Returns the events a command causes, or throws ValidationError / IllegalStateError. */
  decide(command: Command, state: State): Event[];
  evolve(state: State, event: Event): State;
  initialState(): State;
}

/** Folds events over a decider's initial state. */
export function fold<State, Event extends DomainEvent>(
  decider: Pick<Decider<State, never, Event>, 'evolve' | 'initialState'>,
  events: Iterable<Event>,
): State {
  let state = decider.initialState();
  for (const event of events) state = decider.evolve(state, event);
  return state;
}

/** Compile-time exhaustiveness check for `switch` statements over unions. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
