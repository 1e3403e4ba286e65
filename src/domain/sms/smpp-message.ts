/**
 * A recipient's message as SMPP 3.4 submit_sm parts, from the segment plan frozen (and charged) at
 * creation (ADR 0014, ADR 0022). Pure. GSM-7 text is sent with data_coding 0 as unpacked septets (one
 * per octet, an extension character as ESC + its code), UCS-2 with data_coding 8 as UTF-16BE. A text
 * that fits one segment is one part; a longer one is split exactly as `countSegments` counts it (153
 * septets or 67 UTF-16 units a part, an escape pair or a surrogate pair never split), so the parts sent
 * are the segments charged. Concatenation is a user data header (8-bit reference, the default) or the
 * SAR TLVs (sar_msg_ref_num / sar_total_segments / sar_segment_seqnum) where the route asks for it. The
 * reference is derived from the submission and recipient, so a part re-sent after ESME_RTHROTTLED
 * carries the same reference and the phone reassembles one message.
 */
import { SEGMENT_LIMITS, type SmsEncoding } from './encoding.js';

/** GSM 03.38 default alphabet in code order (0x1B is ESC, shown here as a placeholder never matched). */
const GSM7_TABLE =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\u001bÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
/** The extension table: character → its code after ESC. */
const GSM7_EXTENSION: ReadonlyMap<string, number> = new Map([
  ['\f', 0x0a],
  ['^', 0x14],
  ['{', 0x28],
  ['}', 0x29],
  ['\\', 0x2f],
  ['[', 0x3c],
  ['~', 0x3d],
  [']', 0x3e],
  ['|', 0x40],
  ['€', 0x65],
]);
const GSM7_CODES: ReadonlyMap<string, number> = new Map(
  [...GSM7_TABLE].flatMap((char, code) => (code === 0x1b ? [] : [[char, code] as const])),
);
const ESC = 0x1b;

/** data_coding of each encoding (SMPP 3.4 §5.2.19): 0 SMSC default alphabet (GSM 03.38), 8 UCS-2. */
export const DATA_CODING: Readonly<Record<SmsEncoding, number>> = { GSM7: 0, UCS2: 8 };

export type Concatenation = 'udh' | 'sar';

export interface SmppPart {
  /** 1-based. */
  readonly seq: number;
  readonly total: number;
  readonly dataCoding: number;
  /** The short_message octets: the UDH (when concatenated with one) followed by the encoded text. */
  readonly shortMessage: Uint8Array;
  /** esm_class 0x40 (UDH indicator) when a UDH leads the short message. */
  readonly udhIndicator: boolean;
  /** SAR TLVs when concatenated with them. */
  readonly sar: { readonly ref: number; readonly total: number; readonly seq: number } | null;
}

/** One character's encoded units (septets for GSM-7, UTF-16 code units for UCS-2). */
function encodeChar(char: string, encoding: SmsEncoding): number[] {
  if (encoding === 'UCS2') {
    const units: number[] = [];
    for (let i = 0; i < char.length; i++) units.push(char.charCodeAt(i));
    return units;
  }
  const code = GSM7_CODES.get(char);
  if (code !== undefined) return [code];
  const ext = GSM7_EXTENSION.get(char);
  if (ext !== undefined) return [ESC, ext];
  throw new RangeError(`character ${JSON.stringify(char)} is not in the GSM 03.38 alphabet`);
}

/** The text split into segments of units, as a gateway splits it (and as `countSegments` counts). */
export function splitUnits(text: string, encoding: SmsEncoding): number[][] {
  const chars = [...text].map((char) => encodeChar(char, encoding));
  const total = chars.reduce((sum, units) => sum + units.length, 0);
  const [single, part] = SEGMENT_LIMITS[encoding];
  if (total <= single) return [chars.flat()];
  const segments: number[][] = [[]];
  for (const units of chars) {
    let current = segments.at(-1)!;
    if (current.length + units.length > part) {
      current = [];
      segments.push(current);
    }
    current.push(...units);
  }
  return segments;
}

function toOctets(units: readonly number[], encoding: SmsEncoding): Uint8Array {
  if (encoding === 'GSM7') return Uint8Array.from(units);
  const out = new Uint8Array(units.length * 2);
  units.forEach((unit, i) => {
    out[2 * i] = unit >> 8;
    out[2 * i + 1] = unit & 0xff;
  });
  return out;
}

/** The concatenation reference of one recipient's message: 1..255, stable for (submission, recipient). */
export function concatReference(submissionId: string, recipientId: string): number {
  let h = 0x811c9dc5;
  const text = `${submissionId}/${recipientId}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return ((h >>> 0) % 255) + 1;
}

/** The submit_sm parts of a message (one part, or a concatenated message's parts in order). */
export function smppParts(
  text: string,
  encoding: SmsEncoding,
  options: { concatenation: Concatenation; reference: number },
): SmppPart[] {
  const segments = splitUnits(text, encoding);
  const total = segments.length;
  const dataCoding = DATA_CODING[encoding];
  const ref = options.reference & 0xff;
  return segments.map((units, index) => {
    const seq = index + 1;
    const body = toOctets(units, encoding);
    if (total === 1) return { seq, total, dataCoding, shortMessage: body, udhIndicator: false, sar: null };
    if (options.concatenation === 'sar') {
      return { seq, total, dataCoding, shortMessage: body, udhIndicator: false, sar: { ref, total, seq } };
    }
    // UDH: length 5; IE 0x00 (concatenated short messages, 8-bit reference), IE length 3, ref, total, seq.
    const udh = Uint8Array.from([0x05, 0x00, 0x03, ref, total, seq]);
    const shortMessage = new Uint8Array(udh.length + body.length);
    shortMessage.set(udh, 0);
    shortMessage.set(body, udh.length);
    return { seq, total, dataCoding, shortMessage, udhIndicator: true, sar: null };
  });
}

/** The concatenation info a received short message carries (the SMSC simulator's reading), if any. */
export function readConcatenation(
  shortMessage: Uint8Array,
  udhIndicator: boolean,
  sar: { ref?: number | undefined; total?: number | undefined; seq?: number | undefined },
): { ref: number; total: number; seq: number } | null {
  if (sar.total !== undefined && sar.seq !== undefined) {
    return { ref: sar.ref ?? 0, total: sar.total, seq: sar.seq };
  }
  if (!udhIndicator || shortMessage.length < 1) return null;
  const udhLength = shortMessage[0]!;
  let at = 1;
  while (at + 1 < 1 + udhLength && at + 1 < shortMessage.length) {
    const ie = shortMessage[at]!;
    const length = shortMessage[at + 1]!;
    if (ie === 0x00 && length === 3) {
      return { ref: shortMessage[at + 2]!, total: shortMessage[at + 3]!, seq: shortMessage[at + 4]! };
    }
    if (ie === 0x08 && length === 4) {
      return {
        ref: (shortMessage[at + 2]! << 8) | shortMessage[at + 3]!,
        total: shortMessage[at + 4]!,
        seq: shortMessage[at + 5]!,
      };
    }
    at += 2 + length;
  }
  return null;
}

/** Decodes a part's text (GSM-7 unpacked septets or UCS-2), after its UDH: for the simulator and tests. */
export function decodePartText(shortMessage: Uint8Array, dataCoding: number, udhIndicator: boolean): string {
  const start = udhIndicator && shortMessage.length > 0 ? shortMessage[0]! + 1 : 0;
  const body = shortMessage.subarray(start);
  if (dataCoding === DATA_CODING.UCS2) {
    let text = '';
    for (let i = 0; i + 1 < body.length; i += 2) text += String.fromCharCode((body[i]! << 8) | body[i + 1]!);
    return text;
  }
  let text = '';
  for (let i = 0; i < body.length; i++) {
    const code = body[i]!;
    if (code === ESC && i + 1 < body.length) {
      const ext = body[++i]!;
      text += [...GSM7_EXTENSION].find(([, c]) => c === ext)?.[0] ?? ' ';
    } else text += GSM7_TABLE[code] ?? ' ';
  }
  return text;
}
