/**
 * Segment counting against known cases (seed 003, step 8): GSM-7 160/153, extension characters counting
 * double and never split across segments, UCS-2 70/67 for Bengali (and surrogate pairs never split),
 * the encoding chosen by content, and the ten-segment limit.
 */
import { describe, expect, it } from 'vitest';
import { countSegments, isGsm7, MAX_SEGMENTS } from '../../src/domain/sms/encoding.js';

const bengali = (n: number) => 'অ'.repeat(n);

describe('GSM-7', () => {
  it.each([
    [1, 1],
    [160, 1],
    [161, 2],
    [306, 2],
    [307, 3],
    [1530, 10],
    [1531, 11],
  ])('%i plain characters → %i segment(s)', (length, segments) => {
    expect(countSegments('a'.repeat(length))).toEqual({ encoding: 'GSM7', units: length, segments });
  });

  it('extension characters count double: 80 × € fit one segment, 81 need two', () => {
    expect(countSegments('€'.repeat(80))).toEqual({ encoding: 'GSM7', units: 160, segments: 1 });
    // Concatenated: 76 escapes (152 septets) per 153-septet segment.
    expect(countSegments('€'.repeat(81))).toEqual({ encoding: 'GSM7', units: 162, segments: 2 });
    expect(countSegments(`${'a'.repeat(159)}{`)).toEqual({ encoding: 'GSM7', units: 161, segments: 2 });
    for (const char of ['^', '{', '}', '\\', '[', '~', ']', '|', '€', '\f']) {
      expect(countSegments(char).units, char).toBe(2);
    }
  });

  it('an escape sequence is never split across segments (a division would say 2, a gateway sends 3)', () => {
    const text = `${'a'.repeat(152)}€${'a'.repeat(152)}`; // 306 septets
    expect(countSegments(text)).toEqual({ encoding: 'GSM7', units: 306, segments: 3 });
  });

  it('the default alphabet includes £, é, Ø, Δ and friends; anything else is not GSM-7', () => {
    expect(isGsm7('Price £5, café Ø Δ ¿¡ §')).toBe(true);
    expect(isGsm7('naïve')).toBe(false); // ï is not in GSM 03.38
    expect(isGsm7('ঢাকা')).toBe(false);
  });
});

describe('UCS-2 (Bengali)', () => {
  it.each([
    [70, 1],
    [71, 2],
    [134, 2],
    [135, 3],
    [670, 10],
    [671, 11],
  ])('%i Bengali characters → %i segment(s)', (length, segments) => {
    expect(countSegments(bengali(length))).toEqual({ encoding: 'UCS2', units: length, segments });
  });

  it('one non-GSM character makes the whole message UCS-2', () => {
    expect(countSegments(`${'a'.repeat(100)}অ`)).toEqual({ encoding: 'UCS2', units: 101, segments: 2 });
  });

  it('a real Bengali offer: 61 units in one segment, twice as long in two', () => {
    const text = 'প্রিয় গ্রাহক, ঈদ উপলক্ষে ২০% ছাড়! অফারটি ৩০ এপ্রিল পর্যন্ত।';
    expect(countSegments(text)).toEqual({ encoding: 'UCS2', units: 61, segments: 1 });
    expect(countSegments(`${text} ${text}`)).toEqual({ encoding: 'UCS2', units: 123, segments: 2 });
  });

  it('a surrogate pair counts two units and is never split across segments', () => {
    expect(countSegments('😀'.repeat(35))).toEqual({ encoding: 'UCS2', units: 70, segments: 1 });
    const text = `${'অ'.repeat(66)}😀${'অ'.repeat(66)}`; // 134 units; the emoji would straddle 67
    expect(countSegments(text)).toEqual({ encoding: 'UCS2', units: 134, segments: 3 });
  });
});

it("the ten-segment limit is the seed's", () => {
  expect(MAX_SEGMENTS).toBe(10);
  expect(countSegments('').segments).toBe(0);
});
