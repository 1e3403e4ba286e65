/**
 * Given/when/then for deciders (Emmett style): `specFor(decider).given(events).when(command)` then
 * `.then(expectedEvents)`, `.thenSucceeds()` or `.thenThrows(ErrorClass, /message/)`.
 *
 * Every outcome also checks what a decider must never get wrong: `decide` does not mutate the state it
 * is given; accepted events fold through `evolve` (given + new events, without a throw) and folding
 * them incrementally gives the same state as a full replay; a rejected command returns no events.
 */
import { expect } from 'vitest';
import { type Decider, type DomainEvent, fold } from '../domain/decider.js';

type ErrorClass<E extends Error> = abstract new (...args: never[]) => E;

export interface Accepted<State, Event> {
  /** The events decide returned. */
  readonly events: Event[];
  /** The state after folding given + returned events. */
  readonly state: State;
}

export interface WhenClause<State, Event> {
  /** Asserts decide returns exactly `expected`; returns the state after them. */
  then(expected: readonly Event[]): State;
  /** Asserts decide accepts the command (whatever it emits). */
  thenSucceeds(): Accepted<State, Event>;
  /** Asserts decide throws an instance of `errorClass` (message matching `message`) and emits nothing. */
  thenThrows<E extends Error>(errorClass: ErrorClass<E>, message?: RegExp | string): E;
}

export interface GivenClause<State, Command, Event> {
  when(command: Command): WhenClause<State, Event>;
}

export interface Spec<State, Command, Event> {
  given(events: readonly Event[]): GivenClause<State, Command, Event>;
}

export function specFor<State, Command, Event extends DomainEvent>(
  decider: Decider<State, Command, Event>,
): Spec<State, Command, Event> {
  return {
    given(given) {
      const history = [...given];
      return {
        when(command) {
          const accept = (): Accepted<State, Event> => {
            const state = fold(decider, history);
            const before = structuredClone(state);
            const events = decider.decide(command, state);
            expect(state, 'decide must not mutate the state').toEqual(before);
            const replayed = fold(decider, [...history, ...events]);
            const incremental = events.reduce((s, event) => decider.evolve(s, event), state);
            expect(incremental, 'evolving step by step must equal a full replay').toEqual(replayed);
            return { events, state: replayed };
          };
          return {
            // biome-ignore lint/suspicious/noThenProperty: the given/when/then vocabulary; this object is never awaited
            then(expected) {
              const { events, state } = accept();
              expect(events).toEqual(expected);
              return state;
            },
            thenSucceeds: accept,
            thenThrows<E extends Error>(errorClass: ErrorClass<E>, message?: RegExp | string): E {
              const state = fold(decider, history);
              const before = structuredClone(state);
              let emitted: Event[] | undefined;
              let thrown: unknown;
              try {
                emitted = decider.decide(command, state);
              } catch (error) {
                thrown = error;
              }
              expect(emitted, 'a rejected command must emit no events').toBeUndefined();
              expect(thrown).toBeInstanceOf(errorClass);
              if (message !== undefined) expect((thrown as Error).message).toMatch(message);
              expect(state, 'decide must not mutate the state').toEqual(before);
              return thrown as E;
            },
          };
        },
      };
    },
  };
}
