/**
 * A set of MSISDNs in bounded, predictable memory, for de-duplicating a CSV file of up to millions of
 * rows while streaming it: E.164 numbers have at most 15 digits, so each fits a double exactly and the
 * set is an open-addressing table of Float64 slots (8 bytes each, at most half full: 16 MB holds a
 * million numbers), instead of a Set of strings (~80 bytes per entry).
 */
const EMPTY = 0; // no E.164 number is 0

export class MsisdnSet {
  private slots: Float64Array;
  private count = 0;

  constructor(expected = 1_024) {
    let capacity = 16;
    while (capacity < expected * 2) capacity *= 2;
    this.slots = new Float64Array(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** Adds an E.164 digit string; false when it was already there. */
  add(msisdn: string): boolean {
    const value = Number(msisdn);
    if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`not an E.164 number: ${msisdn}`);
    if ((this.count + 1) * 2 > this.slots.length) this.grow();
    return this.insert(this.slots, value);
  }

  private insert(slots: Float64Array, value: number): boolean {
    const mask = slots.length - 1;
    // Multiplicative hashing of the low and high halves; linear probing.
    let i =
      (Math.imul(value % 0x7fffffff, 0x9e3779b1) ^ Math.imul(Math.floor(value / 0x7fffffff), 0x85ebca6b)) &
      mask;
    for (;;) {
      const slot = slots[i]!;
      if (slot === EMPTY) {
        slots[i] = value;
        if (slots === this.slots) this.count++;
        return true;
      }
      if (slot === value) return false;
      i = (i + 1) & mask;
    }
  }

  private grow(): void {
    const old = this.slots;
    const next = new Float64Array(old.length * 2);
    for (const value of old) if (value !== EMPTY) this.insert(next, value);
    this.slots = next;
  }
}
