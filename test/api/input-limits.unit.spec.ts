import { describe, expect, it } from 'vitest';
import { invalidUtf8At, MAX_JSON_DEPTH, parseJsonBody, unstorableField } from '../../src/api/input-limits.js';
import { HttpProblem } from '../../src/api/problem.js';
import { instantInput, isoInstantInRange } from '../../src/domain/time.js';

/** `{"a":{"a":…{"a":leaf}}}` with `levels` objects. */
function nested(levels: number, leaf: unknown = 1): unknown {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

describe('unstorableField', () => {
  it('passes ordinary input, astral characters (surrogate pairs) and Bengali text', () => {
    expect(unstorableField({ body: { name: 'পহেলা বৈশাখ 🎉', tags: ['a', { b: null }] }, query: {} })).toBe(
      undefined,
    );
  });

  it('names the field of a NUL or a lone surrogate, in a value or a key, high or low', () => {
    expect(unstorableField({ body: { name: 'x\ud800' } })).toEqual({
      field: 'body.name',
      reason: 'contains a lone UTF-16 surrogate (not valid Unicode)',
    });
    expect(unstorableField({ body: { list: ['ok', '\udc00y'] } })?.field).toBe('body.list[1]');
    expect(unstorableField({ body: { 'k\ud83d': 1 } })).toMatchObject({ field: 'body.k\ud83d' });
    expect(unstorableField({ params: { subjectId: 'a\u0000' } })).toEqual({
      field: 'params.subjectId',
      reason: 'contains a NUL character',
    });
    // A pair in the wrong order is two lone surrogates.
    expect(unstorableField({ body: { name: '\udc00\ud800' } })?.field).toBe('body.name');
  });

  it('refuses nesting deeper than the limit without recursion, however deep, and takes the limit itself', () => {
    expect(unstorableField({ body: nested(MAX_JSON_DEPTH) })).toBe(undefined);
    expect(unstorableField({ body: nested(MAX_JSON_DEPTH + 1) })?.reason).toBe(
      `is nested deeper than ${MAX_JSON_DEPTH} levels`,
    );
    const deep = unstorableField({ body: nested(200_000) });
    expect(deep?.field.startsWith('body.a.a.a')).toBe(true);
    let arrays: unknown = 'x';
    for (let i = 0; i < 100_000; i++) arrays = [arrays];
    expect(unstorableField({ body: arrays })?.reason).toContain('nested deeper');
  });

  it('reports the first problem in document order', () => {
    expect(unstorableField({ body: { a: 'fine', b: 'x\u0000', c: 'y\ud800' } })?.field).toBe('body.b');
  });
});

describe('keys that serve only prototype pollution', () => {
  it('refuses __proto__ anywhere and constructor.prototype, naming the key path; takes a plain constructor', () => {
    // JSON.parse makes "__proto__" an own property, as the API's parser hands it over.
    const body = JSON.parse('{"actionConfig":{"a":[{"__proto__":{"isAdmin":true}}]}}');
    expect(unstorableField({ body })).toEqual({
      field: 'body.actionConfig.a[0].__proto__',
      reason: 'is a __proto__ key, refused: it serves only prototype pollution',
    });
    expect(({} as { isAdmin?: boolean }).isAdmin).toBe(undefined);
    const ctor = JSON.parse('{"payload":{"constructor":{"prototype":{"x":1}}}}');
    expect(unstorableField({ body: ctor })?.field).toBe('body.payload.constructor');
    expect(unstorableField({ body: { payload: { constructor: 'a string', prototype: 1 } } })).toBe(undefined);
  });
});

describe('the JSON body parser', () => {
  const bytes = (...parts: (string | number[])[]) =>
    Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));

  it('parses UTF-8 JSON, Bengali and astral characters included', () => {
    expect(parseJsonBody(bytes('{"name":"পহেলা 🎉"}'))).toEqual({ name: 'পহেলা 🎉' });
  });

  it.each([
    ['a stray continuation byte', bytes('{"n":"', [0x80], '"}'), 6],
    ['0xff', bytes('{"n":"ab', [0xff], '"}'), 8],
    ['an overlong "/"', bytes('{"n":"', [0xc0, 0xaf], '"}'), 6],
    ['an encoded surrogate (CESU-8)', bytes('{"n":"', [0xed, 0xa0, 0x80], '"}'), 6],
    ['a code point above U+10FFFF', bytes('{"n":"', [0xf4, 0x90, 0x80, 0x80], '"}'), 6],
    ['a truncated sequence at the end', bytes('{"n":"x"}', [0xe0, 0xa4]), 9],
  ])('refuses %s with a 400 naming its offset, never reading it as U+FFFD', (_name, body, offset) => {
    expect(invalidUtf8At(body)).toBe(offset);
    let thrown: unknown;
    try {
      parseJsonBody(body);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(HttpProblem);
    expect(thrown).toMatchObject({ status: 400, code: 'INVALID_UTF8' });
    expect((thrown as Error).message).toContain(`at offset ${offset}`);
  });

  it('says where JSON is malformed', () => {
    expect(() => parseJsonBody(bytes('{"a":'))).toThrow(/^body is not valid JSON: /);
    expect(invalidUtf8At(bytes('plain ascii ✓ and 🎉'))).toBe(-1);
  });
});

describe('instants Herald takes', () => {
  it('refuses year 0000 and years past 9999, takes the edges', () => {
    expect(instantInput.safeParse('0000-01-01T00:00:00Z').success).toBe(false);
    expect(instantInput.safeParse('1969-12-31T23:59:59Z').success).toBe(false);
    expect(instantInput.safeParse(new Date(Date.UTC(10_000, 0, 1))).success).toBe(false);
    expect(instantInput.parse('1970-01-01T00:00:00Z')).toBe('1970-01-01T00:00:00.000Z');
    expect(instantInput.parse('9999-12-31T23:59:59.999+00:00')).toBe('9999-12-31T23:59:59.999Z');
    expect(isoInstantInRange.safeParse('0000-06-01T00:00:00+00:00').success).toBe(false);
    expect(isoInstantInRange.safeParse('2026-12-06T10:00:00+06:00').success).toBe(true);
  });

  it('hands an instant on as UTC: offsets past ±15:59 (ISO allows ±23:59) never reach PostgreSQL', () => {
    expect(isoInstantInRange.parse('2026-01-01T00:00:00-23:59')).toBe('2026-01-01T23:59:00.000Z');
    expect(isoInstantInRange.parse('2026-12-06T10:00:00+06:00')).toBe('2026-12-06T04:00:00.000Z');
    // What is no instant is refused with its issue, not thrown from the conversion.
    expect(isoInstantInRange.safeParse('yesterday').error?.issues[0]?.code).toBe('invalid_format');
  });
});
