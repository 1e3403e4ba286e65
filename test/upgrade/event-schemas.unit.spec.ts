/**
 * Event schema versions (ADR 0039), pure: an upcaster chain applies in order, the decider sees only the
 * current shape, a version newer than the release reads is refused, a pinned write version is encoded
 * through its downcaster, and malformed declarations are refused when the aggregate is defined.
 */
import { describe, expect, it } from 'vitest';
import { fold } from '../../src/domain/decider.js';
import {
  EventSchemas,
  type EventUpcaster,
  UnsupportedEventVersionError,
} from '../../src/domain/event-schemas.js';
import { ValidationError } from '../../src/errors.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import { creditedV1toV2, deciderV2, SCHEMAS, walletRegistration } from './wallet-releases.js';

/** A v3 of Credited for the chain test: money as one object. */
const creditedV2toV3 = {
  type: 'Credited',
  from: 2,
  up: (data: unknown) => {
    const v2 = data as { amountMinor: number; currency: string };
    return { money: { minor: v2.amountMinor, currency: v2.currency } };
  },
};

describe('event schemas: upcasters', () => {
  it('apply a chain v1 → v2 → v3 in order, whatever order they are declared in', () => {
    const calls: string[] = [];
    const traced = (u: EventUpcaster, name: string) => ({
      ...u,
      up: (data: unknown) => {
        calls.push(name);
        return u.up(data);
      },
    });
    const schemas = new EventSchemas('wallet', {
      upcasters: [traced(creditedV2toV3, '2→3'), traced(creditedV1toV2, '1→2')],
    });
    expect(schemas.reads('Credited')).toBe(3);
    expect(schemas.upcast({ type: 'Credited', data: { amount: 12.34 }, schemaVersion: 1 })).toEqual({
      money: { minor: 1234, currency: 'EUR' },
    });
    expect(calls).toEqual(['1→2', '2→3']);
    calls.length = 0;
    expect(
      schemas.upcast({ type: 'Credited', data: { amountMinor: 5, currency: 'USD' }, schemaVersion: 2 }),
    ).toEqual({
      money: { minor: 5, currency: 'USD' },
    });
    expect(calls).toEqual(['2→3']);
    // The current version and event types without upcasters pass untouched.
    const current = { money: { minor: 1, currency: 'EUR' } };
    expect(schemas.upcast({ type: 'Credited', data: current, schemaVersion: 3 })).toBe(current);
    expect(schemas.upcast({ type: 'Opened', data: { organizationId: 'o' }, schemaVersion: 1 })).toEqual({
      organizationId: 'o',
    });
  });

  it('refuse a version newer than the release reads (a newer release wrote it), and version 0', () => {
    const schemas = new EventSchemas('wallet', SCHEMAS.N);
    const read = (schemaVersion: number) => () =>
      schemas.upcast({ type: 'Credited', data: { amountMinor: 1, currency: 'EUR' }, schemaVersion });
    expect(read(2)).toThrow(UnsupportedEventVersionError);
    expect(read(2)).toThrow('wallet event Credited has schema version 2; this release reads up to 1');
    expect(read(0)).toThrow(UnsupportedEventVersionError);
    try {
      read(2)();
    } catch (error) {
      expect((error as UnsupportedEventVersionError).code).toBe('UNSUPPORTED_VERSION');
    }
  });

  it('write the current version, or the pinned one through its downcaster', () => {
    const current = { type: 'Credited', data: { amountMinor: 250, currency: 'EUR' } };
    expect(new EventSchemas('wallet', SCHEMAS['N+2']).encode(current)).toEqual({
      data: current.data,
      schemaVersion: 2,
    });
    const pinned = new EventSchemas('wallet', SCHEMAS['N+1']);
    expect(pinned.writes('Credited')).toBe(1);
    expect(pinned.reads('Credited')).toBe(2);
    expect(pinned.encode(current)).toEqual({ data: { amount: 2.5 }, schemaVersion: 1 });
    expect(pinned.encode({ type: 'Opened', data: { organizationId: 'o' } })).toEqual({
      data: { organizationId: 'o' },
      schemaVersion: 1,
    });
  });

  it('refuse malformed declarations: a gap, a repeat, a pinned version without its downcaster or out of range', () => {
    expect(() => new EventSchemas('wallet', { upcasters: [creditedV2toV3] })).toThrow(ValidationError);
    expect(() => new EventSchemas('wallet', { upcasters: [creditedV1toV2, creditedV1toV2] })).toThrow(
      /without gaps or repeats/,
    );
    expect(
      () => new EventSchemas('wallet', { upcasters: [creditedV1toV2], writes: { Credited: 1 } }),
    ).toThrow('wallet event Credited: writes version 1 but has no downcaster to 1');
    expect(
      () => new EventSchemas('wallet', { upcasters: [creditedV1toV2], writes: { Credited: 3 } }),
    ).toThrow('wallet event Credited: writes version 3, reads 1 to 2');
  });
});

describe('the decider sees only the current shape', () => {
  // Old events as an old release stored them: versions 1 and 2 mixed in one stream.
  const stored = [
    { type: 'Opened', data: { organizationId: 'org-1' }, schemaVersion: 1 },
    { type: 'Credited', data: { amount: 1.5 }, schemaVersion: 1 },
    { type: 'Credited', data: { amountMinor: 25, currency: 'EUR' }, schemaVersion: 2 },
  ];

  it('the registry’s state model upcasts before evolve (replay, verify and the sandbox fold through it)', () => {
    const registry = new AggregateRegistry([walletRegistration('N+2', 'q')]);
    const model = registry.stateModelFor('wallet');
    let state = model.initial();
    for (const event of stored) state = model.apply(state, event);
    expect(state).toEqual({ status: 'open', balanceMinor: 175, credits: 2 });
    // What folding the current shapes directly gives: the same.
    const current = stored.map((e) => model.upcast(e));
    expect(current[1]).toEqual({
      type: 'Credited',
      data: { amountMinor: 150, currency: 'EUR' },
      schemaVersion: 2,
    });
    expect(fold(deciderV2, current as never)).toEqual(state);
  });

  it('without the upcaster the current decider cannot fold the old event (so the upcaster is what makes it work)', () => {
    const registry = new AggregateRegistry([walletRegistration('N+2', 'q')]);
    const model = registry.stateModelFor('wallet');
    expect(() => fold(deciderV2, stored as never)).toThrow('Credited without its amount');
    expect(() => model.apply(model.initial(), { ...stored[1]!, schemaVersion: 3 })).toThrow(
      UnsupportedEventVersionError,
    );
  });

  it('a stream type without a state model (a side stream) reads version 1 only', () => {
    const registry = new AggregateRegistry([walletRegistration('N', 'q')]);
    const side = { streamType: 'wallet_note', type: 'Noted', data: {}, schemaVersion: 1 };
    expect(registry.upcast(side)).toBe(side);
    expect(() => registry.upcast({ ...side, schemaVersion: 2 })).toThrow(UnsupportedEventVersionError);
  });
});
