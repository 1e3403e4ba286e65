/**
 * Time values for every domain (campaign, scheduled action, …). Commands accept a Date or an ISO-8601 string with an offset;
 * everything stored (events, state) is the canonical UTC form `Date#toISOString()` so that events
 * survive a jsonb round trip unchanged and replay reproduces state byte for byte (invariant 8).
 * Comparisons go through epoch milliseconds, never string order.
 */
import { z } from 'zod';

/**
 * The instants Herald takes: 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z. ISO-8601 allows year 0000
 * (PostgreSQL has no year 0: "date/time field value out of range") and Date more than PostgreSQL stores;
 * nothing Herald schedules or lists lies outside this range.
 */
export const EARLIEST_INSTANT = '1970-01-01T00:00:00.000Z';
export const LATEST_INSTANT = '9999-12-31T23:59:59.999Z';
const IN_RANGE = `must lie between ${EARLIEST_INSTANT} and ${LATEST_INSTANT}`;

export function instantInRange(epochMs: number): boolean {
  return epochMs >= Date.parse(EARLIEST_INSTANT) && epochMs <= Date.parse(LATEST_INSTANT);
}

/** Command input: a valid Date or an ISO-8601 date-time with Z or an offset; output: canonical ISO UTC. */
export const instantInput = z
  .union([z.date(), z.iso.datetime({ offset: true })], {
    error: 'expected a Date or an ISO-8601 date-time with an offset',
  })
  .refine((value) => instantInRange((value instanceof Date ? value : new Date(value)).getTime()), IN_RANGE)
  .transform((value) => (value instanceof Date ? value : new Date(value)).toISOString());

/**
 * An ISO-8601 date-time with an offset, within Herald's range (query strings and request bodies), handed
 * on as canonical UTC: JavaScript and ISO-8601 allow offsets up to ±23:59, PostgreSQL only up to ±15:59
 * ("time zone displacement out of range"), so the offset never reaches the database.
 */
export const isoInstantInRange = z.iso
  .datetime({ offset: true })
  .refine((value) => instantInRange(Date.parse(value)), IN_RANGE)
  // Runs after a failed check too (zod goes on to collect every issue): a value that is no instant stays as is.
  .overwrite((value) => {
    const epochMs = Date.parse(value);
    return Number.isNaN(epochMs) ? value : new Date(epochMs).toISOString();
  });

export type InstantInput = z.input<typeof instantInput>;

/** Stored form (events): canonical ISO UTC as written by `toISOString()`. */
export const storedInstant = z.iso.datetime();

export function ms(iso: string): number {
  return Date.parse(iso);
}
