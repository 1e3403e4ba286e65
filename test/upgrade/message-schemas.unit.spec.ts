/** Message schema versions (ADR 0039), pure: the header, the upcaster chain and the refusal of a newer version. */
import { describe, expect, it } from 'vitest';
import { DeadLetterError, PermanentError, ValidationError } from '../../src/errors.js';
import { HEADER } from '../../src/messaging/headers.js';
import { MessageSchema, messageVersionOf, VERSION_ONE } from '../../src/messaging/message-schemas.js';
import { toOutboxRows } from '../../src/outbox/outbox-writer.js';
import { walletMessagesV2 } from './wallet-releases.js';

describe('message versions', () => {
  it('every outbox row carries its version header: 1 unless the message says otherwise', () => {
    const origin = { eventPosition: 1, eventType: 'Credited', streamType: 'wallet', streamId: 'w', meta: {} };
    const [plain, second] = toOutboxRows(origin, [
      { destination: 'q', payload: {} },
      { destination: 'q', payload: {}, version: 2 },
    ]);
    expect(plain!.headers![HEADER.messageVersion]).toBe('1');
    expect(second!.headers![HEADER.messageVersion]).toBe('2');
  });

  it('reads the header as a positive integer, absent as 1; anything else is refused as poison', () => {
    expect(messageVersionOf({})).toBe(1);
    expect(messageVersionOf({ [HEADER.messageVersion]: '3' })).toBe(3);
    expect(messageVersionOf({ [HEADER.messageVersion]: 2 })).toBe(2);
    expect(messageVersionOf({ [HEADER.messageVersion]: Buffer.from('4') })).toBe(4);
    for (const bad of ['0', '-1', '1.5', 'two', ''])
      expect(() => messageVersionOf({ [HEADER.messageVersion]: bad })).toThrow(PermanentError);
  });

  it('upcasts older payloads in order, passes the current one, dead-letters a newer one', () => {
    const v3 = new MessageSchema([
      {
        from: 2,
        up: (p) => ({ ...(p as object), step: [...((p as { step?: string[] }).step ?? []), '2→3'] }),
      },
      { from: 1, up: (p) => ({ ...(p as object), step: ['1→2'] }) },
    ]);
    expect(v3.reads).toBe(3);
    expect(v3.upcast({ a: 1 }, 1)).toEqual({ a: 1, step: ['1→2', '2→3'] });
    expect(v3.upcast({ a: 1 }, 3)).toEqual({ a: 1 });
    expect(walletMessagesV2.upcast({ walletId: 'w', amount: 1.25 }, 1)).toEqual({
      walletId: 'w',
      amountMinor: 125,
      currency: 'EUR',
    });
    expect(() => VERSION_ONE.upcast({}, 2)).toThrow(DeadLetterError);
    expect(() => VERSION_ONE.upcast({}, 2)).toThrow(
      'message schema version 2 is newer than this consumer reads (up to 1)',
    );
    expect(() => new MessageSchema([{ from: 2, up: (p) => p }])).toThrow(ValidationError);
  });
});
