/**
 * SMS encodings and segment counting (seed 003, step 8: "calculate its segments, and apply the
 * ten-segment limit"). Pure. A message is GSM-7 when every character is in the GSM 03.38 default
 * alphabet or its extension table, UCS-2 otherwise:
 * - GSM-7: 160 septets in one segment, 153 per segment when concatenated (the user data header takes 7);
 *   an extension character (`^ { } \ [ ~ ] | €` and form feed) is an escape plus a character, so it
 *   counts double, and the two septets are never split across segments (the next segment starts early).
 * - UCS-2: 70 UTF-16 code units in one segment, 67 when concatenated; a character outside the BMP is a
 *   surrogate pair (two units) and is never split across segments either.
 * Splitting exactly as a gateway does, rather than dividing, keeps the count and the charge right at
 * segment boundaries.
 */

/** GSM 03.38 default alphabet (without ESC, which only introduces an extension character). */
const GSM7_BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
/** The extension table: each is sent as ESC + character, two septets. */
const GSM7_EXTENSION = '\f^{}\\[~]|€';

const basic: ReadonlySet<string> = new Set(GSM7_BASIC);
const extension: ReadonlySet<string> = new Set(GSM7_EXTENSION);

export type SmsEncoding = 'GSM7' | 'UCS2';
export const SMS_ENCODINGS = ['GSM7', 'UCS2'] as const;

/** Seed 003: a message may not need more than ten segments. */
export const MAX_SEGMENTS = 10;

/** Units per segment: [single message, each part of a concatenated message]. */
export const SEGMENT_LIMITS: Readonly<Record<SmsEncoding, readonly [number, number]>> = {
  GSM7: [160, 153],
  UCS2: [70, 67],
};

export function isGsm7Char(char: string): boolean {
  return basic.has(char) || extension.has(char);
}

/** True when every character of `text` can be sent in GSM-7 (default alphabet or extension table). */
export function isGsm7(text: string): boolean {
  for (const char of text) if (!isGsm7Char(char)) return false;
  return true;
}

export interface SegmentCount {
  encoding: SmsEncoding;
  /** Septets (GSM-7, extension characters counting two) or UTF-16 code units (UCS-2). */
  units: number;
  segments: number;
}

/** Sizes of each character in units, for the encoding. */
function unitSizes(text: string, encoding: SmsEncoding): number[] {
  const sizes: number[] = [];
  for (const char of text) {
    if (encoding === 'GSM7') sizes.push(extension.has(char) ? 2 : 1);
    else sizes.push(char.length); // 2 for a surrogate pair
  }
  return sizes;
}

/** Encoding, length in units and number of segments of a message (0 segments for an empty text). */
export function countSegments(text: string): SegmentCount {
  const encoding: SmsEncoding = isGsm7(text) ? 'GSM7' : 'UCS2';
  const sizes = unitSizes(text, encoding);
  const units = sizes.reduce((sum, n) => sum + n, 0);
  const [single, part] = SEGMENT_LIMITS[encoding];
  if (units === 0) return { encoding, units, segments: 0 };
  if (units <= single) return { encoding, units, segments: 1 };
  let segments = 1;
  let used = 0;
  for (const size of sizes) {
    if (used + size > part) {
      segments++;
      used = 0;
    }
    used += size;
  }
  return { encoding, units, segments };
}
