/**
 * Money for SMS pricing and billing: amounts are decimal strings with four fractional digits
 * ("0.3500" BDT), computed as integer ten-thousandths so a total is exactly the sum of its parts
 * (segments × rate per recipient, recipients per campaign) and equals what the ledger deducts. Pure.
 */
import { ValidationError } from '../../errors.js';

/** Fractional digits of every amount (PostgreSQL numeric(…, 4)). */
export const MONEY_SCALE = 4;
const FACTOR = 10 ** MONEY_SCALE;
const MONEY = /^(\d{1,12})(?:\.(\d{1,4}))?$/;

/** Ten-thousandths of the currency unit. */
export type MoneyUnits = number;

export function isMoney(text: string): boolean {
  return MONEY.test(text);
}

/** "12.35" → 123500. Throws ValidationError for anything but a non-negative decimal with ≤ 4 fraction digits. */
export function toUnits(text: string): MoneyUnits {
  const match = MONEY.exec(text);
  if (!match) {
    throw new ValidationError(
      `invalid amount '${text}': a non-negative decimal with at most 4 fraction digits`,
      {
        field: 'amount',
        rule: 'amount.format',
        amount: text,
      },
    );
  }
  return Number(match[1]) * FACTOR + Number((match[2] ?? '').padEnd(MONEY_SCALE, '0'));
}

/** 123500 → "12.3500". */
export function formatUnits(units: MoneyUnits): string {
  if (!Number.isSafeInteger(units) || units < 0) throw new RangeError(`invalid money units ${units}`);
  const whole = Math.floor(units / FACTOR);
  const fraction = String(units % FACTOR).padStart(MONEY_SCALE, '0');
  return `${whole}.${fraction}`;
}

/** The canonical spelling of an amount ("12.35" → "12.3500"). */
export function canonicalMoney(text: string): string {
  return formatUnits(toUnits(text));
}

export function addMoney(a: string, b: string): string {
  return formatUnits(toUnits(a) + toUnits(b));
}

export const ZERO_MONEY = formatUnits(0);
