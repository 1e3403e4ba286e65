/**
 * The SMPP gateway's pure parts (ADR 0022): a message as submit_sm parts (GSM-7 septets or UCS-2, UDH or
 * SAR concatenation, exactly the segments charged), receipt parsing (text and TLVs), command-status
 * classification and a recipient's report from its parts' outcomes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideReport, isTemporaryFailure } from '../../src/domain/sms/delivery.js';
import { countSegments } from '../../src/domain/sms/encoding.js';
import {
  concatReference,
  decodePartText,
  readConcatenation,
  smppParts,
} from '../../src/domain/sms/smpp-message.js';
import {
  classifySubmitStatus,
  isTemporarySmppCode,
  type PartOutcome,
  parseReceipt,
  parseReceiptText,
  recipientReport,
  SMPP_CODES,
  submitErrorCode,
} from '../../src/domain/sms/smpp-outcome.js';

const udh = { concatenation: 'udh' as const, reference: 7 };

describe('smppParts', () => {
  it('a short GSM-7 text is one part of unpacked septets, data_coding 0, no UDH', () => {
    const [part, ...rest] = smppParts('Hello @ home {x}', 'GSM7', udh);
    expect(rest).toEqual([]);
    expect(part).toMatchObject({ seq: 1, total: 1, dataCoding: 0, udhIndicator: false, sar: null });
    // '@' is 0x00; '{' is ESC 0x28, '}' is ESC 0x29.
    expect([...part!.shortMessage].slice(0, 8)).toEqual([0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x00, 0x20]);
    expect([...part!.shortMessage].slice(-5)).toEqual([0x1b, 0x28, 0x78, 0x1b, 0x29]);
    expect(decodePartText(part!.shortMessage, 0, false)).toBe('Hello @ home {x}');
  });

  it('a 161-septet text is two UDH parts of 153 and 8 septets with the same reference', () => {
    const text = 'a'.repeat(161);
    const parts = smppParts(text, 'GSM7', udh);
    expect(parts.map((p) => p.shortMessage.length - 6)).toEqual([153, 8]);
    for (const p of parts) {
      expect(p.udhIndicator).toBe(true);
      expect([...p.shortMessage.subarray(0, 6)]).toEqual([5, 0, 3, 7, 2, p.seq]);
      expect(readConcatenation(p.shortMessage, true, {})).toEqual({ ref: 7, total: 2, seq: p.seq });
    }
    expect(parts.map((p) => decodePartText(p.shortMessage, 0, true)).join('')).toBe(text);
  });

  it('never splits an escape pair: the part ends early and the next one starts with ESC', () => {
    const text = `${'a'.repeat(152)}€${'b'.repeat(10)}`;
    const parts = smppParts(text, 'GSM7', udh);
    expect(parts[0]!.shortMessage.length - 6).toBe(152);
    expect(parts[1]!.shortMessage[6]).toBe(0x1b);
  });

  it('UCS-2 (Bengali) is UTF-16BE, data_coding 8, 67 units a part; SAR TLVs instead of a UDH where asked', () => {
    const text = 'প্রিয় গ্রাহক, ঈদ মোবারক! '.repeat(4);
    const parts = smppParts(text, 'UCS2', { concatenation: 'sar', reference: 200 });
    expect(parts.length).toBe(countSegments(text).segments);
    for (const p of parts) {
      expect(p).toMatchObject({
        dataCoding: 8,
        udhIndicator: false,
        sar: { ref: 200, total: parts.length, seq: p.seq },
      });
      expect(p.shortMessage.length).toBeLessThanOrEqual(134);
    }
    expect(parts.map((p) => decodePartText(p.shortMessage, 8, false)).join('')).toBe(text);
  });

  it('sends exactly the segments charged, for any text (property)', () => {
    const gsm = fc.stringMatching(/^[A-Za-z0-9 .,!?{}[\]~€^|\\@£$]{0,600}$/);
    const ucs = fc.string({ unit: 'binary', minLength: 1, maxLength: 400 });
    fc.assert(
      fc.property(fc.oneof(gsm, ucs), (text) => {
        fc.pre(text.length > 0);
        const { encoding, segments } = countSegments(text);
        const parts = smppParts(text, encoding, udh);
        expect(parts.length).toBe(segments);
        const decoded = parts
          .map((p) => decodePartText(p.shortMessage, p.dataCoding, p.udhIndicator))
          .join('');
        if (encoding === 'UCS2') expect(decoded).toBe(text);
        else expect(decoded).toBe(text);
      }),
      { numRuns: 300 },
    );
  });

  it('the concatenation reference is stable per (submission, recipient) and in 1..255', () => {
    const a = concatReference('0b7c5d6e-0000-4000-8000-000000000001', '42');
    expect(a).toBe(concatReference('0b7c5d6e-0000-4000-8000-000000000001', '42'));
    expect(a).toBeGreaterThanOrEqual(1);
    expect(a).toBeLessThanOrEqual(255);
  });
});

describe('receipts', () => {
  const text =
    'id:0a1b2c3d sub:001 dlvrd:001 submit date:2612061010 done date:2612061011 stat:DELIVRD err:000 text:Hello there';

  it('parses the Appendix B text, text: running to the end', () => {
    expect(parseReceiptText(text)).toEqual({
      id: '0a1b2c3d',
      sub: '001',
      dlvrd: '001',
      submitDate: '2612061010',
      doneDate: '2612061011',
      stat: 'DELIVRD',
      err: '000',
      text: 'Hello there',
    });
    expect(parseReceiptText('stat:DELIVRD')).toBeNull();
  });

  it('maps final states to DLR outcomes and codes without leading zeros', () => {
    expect(parseReceipt({ text })).toMatchObject({
      ok: true,
      messageId: '0a1b2c3d',
      outcome: 'DELIVERED',
      errorCode: null,
    });
    expect(parseReceipt({ text: 'id:9 stat:UNDELIV err:027' })).toMatchObject({
      outcome: 'FAILED',
      errorCode: '27',
    });
    expect(parseReceipt({ text: 'id:9 stat:REJECTD err:001' })).toMatchObject({
      outcome: 'REJECTED',
      errorCode: '1',
    });
    expect(parseReceipt({ text: 'id:9 stat:EXPIRED err:000' })).toMatchObject({
      outcome: 'EXPIRED',
      errorCode: null,
    });
    expect(parseReceipt({ text: 'id:9 stat:UNKNOWN' })).toMatchObject({ outcome: 'NOT_AVAILABLE' });
    expect(parseReceipt({ text: 'id:9 stat:ACCEPTD' })).toMatchObject({ ok: true, outcome: null });
    expect(parseReceipt({ text: 'id:9 stat:ENROUTE' })).toMatchObject({ ok: true, outcome: null });
  });

  it('the TLVs win over the text', () => {
    const parsed = parseReceipt({ text: 'id:1 stat:DELIVRD', receiptedMessageId: 'abc', messageState: 5 });
    expect(parsed).toMatchObject({ ok: true, messageId: 'abc', state: 'UNDELIVERABLE', outcome: 'FAILED' });
    const network = parseReceipt({
      text: '',
      receiptedMessageId: 'abc',
      messageState: 5,
      networkErrorCode: Uint8Array.from([1, 0, 34]),
    });
    expect(network).toMatchObject({ ok: true, errorCode: '34' });
  });

  it('refuses what it cannot read, naming why', () => {
    expect(parseReceipt({ text: 'garbage' })).toMatchObject({ ok: false, messageId: null });
    expect(parseReceipt({ text: 'id:1 stat:WHATEVER' })).toMatchObject({ ok: false, messageId: '1' });
    expect(parseReceipt({ text: 'id:1' })).toMatchObject({ ok: false });
    expect(parseReceipt({ text: '', receiptedMessageId: 'x', messageState: 42 })).toMatchObject({
      ok: false,
    });
  });
});

describe('command status classification', () => {
  it('throttled, retryable, permanent', () => {
    expect(classifySubmitStatus(0)).toBe('accepted');
    expect(classifySubmitStatus(0x58)).toBe('throttled');
    for (const s of [0x08, 0x14, 0x64, 0xfe, 0xff]) expect(classifySubmitStatus(s)).toBe('retryable');
    for (const s of [0x0a, 0x0b, 0x65, 0x66, 0x104, 0x45 + 1])
      expect(classifySubmitStatus(s)).toBe('permanent');
  });

  it('feeds the failure classifier: a retryable status is a temporary failure, a permanent one is not', () => {
    expect(submitErrorCode(0x14)).toBe('SMPP_0x00000014');
    expect(isTemporarySmppCode('SMPP_0x00000014')).toBe(true);
    expect(isTemporarySmppCode('SMPP_0x0000000b')).toBe(false);
    expect(isTemporaryFailure('FAILED', 'SMPP_0x00000008', [])).toBe(true);
    expect(isTemporaryFailure('FAILED', 'SMPP_0x0000000b', [])).toBe(false);
    const policy = { maxAttempts: 3, retryMs: 1000, jitterMs: 0, retryableCodes: [] };
    expect(
      decideReport(
        { status: 'NOT_AVAILABLE', errorCode: SMPP_CODES.UNCONFIRMED },
        { attempts: 1 },
        'DISPATCHING',
        policy,
        0,
      ),
    ).toEqual({
      status: 'FAILED',
      failureClass: 'UNCONFIRMED',
      unconfirmed: true,
      refundRequired: false,
    });
    expect(
      decideReport(
        { status: 'SEND_FAILED', errorCode: 'SMPP_WITHDRAWN:PAUSED' },
        { attempts: 1 },
        'PAUSED',
        policy,
        0,
      ),
    ).toMatchObject({
      status: 'RETRY_PENDING',
    });
    expect(
      decideReport(
        { status: 'SEND_FAILED', errorCode: 'SMPP_WITHDRAWN:CANCELLING' },
        { attempts: 1 },
        'CANCELLING',
        policy,
        0,
      ),
    ).toMatchObject({
      status: 'FAILED',
      failureClass: 'LATE',
      refundRequired: true,
    });
  });
});

describe('recipientReport', () => {
  const part = (state: PartOutcome['state'], extra: Partial<PartOutcome> = {}): PartOutcome => ({
    state,
    commandStatus: null,
    receipt: null,
    ...extra,
  });
  const delivered = part('accepted', { receipt: { outcome: 'DELIVERED', errorCode: null } });

  it('stays open while parts are queued, sending or awaiting receipts', () => {
    expect(recipientReport([part('queued')])).toBeNull();
    expect(recipientReport([delivered, part('sending')])).toBeNull();
    expect(recipientReport([delivered, part('accepted')])).toBeNull();
  });

  it('DELIVERED only when every part was delivered', () => {
    expect(recipientReport([delivered, delivered])).toEqual({ status: 'DELIVERED', errorCode: null });
  });

  it('any unanswered part makes the recipient UNCONFIRMED', () => {
    expect(recipientReport([delivered, part('unconfirmed')])).toEqual({
      status: 'NOT_AVAILABLE',
      errorCode: 'SMPP_UNCONFIRMED',
    });
  });

  it('a failed part: its class alone, PARTIAL (permanent) once another part went', () => {
    expect(recipientReport([part('failed', { commandStatus: 0x0b })])).toEqual({
      status: 'REJECTED',
      errorCode: 'SMPP_0x0000000b',
    });
    expect(recipientReport([part('failed', { commandStatus: 0x14 })])).toEqual({
      status: 'FAILED',
      errorCode: 'SMPP_0x00000014',
    });
    expect(recipientReport([delivered, part('failed', { commandStatus: 0x14 })])).toEqual({
      status: 'REJECTED',
      errorCode: 'SMPP_PARTIAL:SMPP_0x00000014',
    });
  });

  it('withdrawn with nothing sent: SEND_FAILED (safe to resend); after a sent part: unconfirmed', () => {
    expect(recipientReport([part('withdrawn', { reason: 'PAUSED' }), part('withdrawn')])).toEqual({
      status: 'SEND_FAILED',
      errorCode: 'SMPP_WITHDRAWN:PAUSED',
    });
    expect(recipientReport([delivered, part('withdrawn')])).toMatchObject({ status: 'NOT_AVAILABLE' });
  });

  it('a receipt that is not DELIVERED decides at once', () => {
    const undelivered = part('accepted', { receipt: { outcome: 'FAILED', errorCode: '27' } });
    expect(recipientReport([undelivered, part('accepted')])).toEqual({ status: 'FAILED', errorCode: '27' });
  });
});
