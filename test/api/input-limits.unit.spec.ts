import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, unstorableField } from '../../src/api/input-limits.js';
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
});
