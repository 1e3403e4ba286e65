/**
 * Time values for every domain (campaign, scheduled action, …). Commands accept a Date or an ISO-8601 string with an offset;
 * everything stored (events, state) is the canonical UTC form `Date#toISOString()` so that events
 * survive a jsonb round trip unchanged and replay reproduces state byte for byte (invariant 8).
 * Comparisons go through epoch milliseconds, never string order.
 */
import { z } from 'zod';

/** Command input: a valid Date or an ISO-8601 date-time with Z or an offset; output: canonical ISO UTC. */
export const instantInput = z
  .union([z.date(), z.iso.datetime({ offset: true })], {
    error: 'expected a Date or an ISO-8601 date-time with an offset',
  })
  .transform((value) => (value instanceof Date ? value : new Date(value)).toISOString());

export type InstantInput = z.input<typeof instantInput>;

/** Stored form (events): canonical ISO UTC as written by `toISOString()`. */
export const storedInstant = z.iso.datetime();

export function ms(iso: string): number {
  return Date.parse(iso);
}
