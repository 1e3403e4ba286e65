/**
 * Request schemas shared by the routes: a typed handle on one command of a domain's discriminated
 * union (so a body is built from the domain's own field schemas: one source for validation, typing and
 * the OpenAPI document), path parameters, list queries and keyset cursors. Cursors are opaque to
 * clients (base64url JSON of the last item's sort key) and validated like any other input.
 */
import { z } from 'zod';
import { EARLIEST_INSTANT, isoInstantInRange, LATEST_INSTANT } from '../domain/time.js';

type CommandOption<U extends readonly z.ZodObject[], T extends string> = Extract<
  U[number],
  { shape: { type: z.ZodLiteral<T> } }
>;

/** The schema of one command of a domain's command union (its fields are the API body's fields). */
export function commandSchema<const U extends readonly z.ZodObject[], T extends string>(
  options: U,
  type: T,
): CommandOption<U, T> {
  const found = options.find((option) => (option.shape.type as z.ZodLiteral<string>).value === type);
  if (!found) throw new Error(`no command ${type} in the union`);
  return found as CommandOption<U, T>;
}

export const uuidParams = z.strictObject({ id: z.uuid().describe('the resource id') });

export const outboxParams = z.strictObject({
  id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER).describe('the outbox row id'),
});

export const limit = z.coerce.number().int().min(1).max(500).default(50).describe('items per page (1–500)');

/** A query-string time: ISO-8601 with an offset. */
export const instantQuery = isoInstantInRange.describe(
  `ISO-8601 date-time with an offset, ${EARLIEST_INSTANT} to ${LATEST_INSTANT}`,
);

/** A boolean query flag: `true` or `false` (documented as a boolean, as a query string carries it). */
export const flag = z
  .stringbool({ truthy: ['true'], falsy: ['false'] })
  .meta({ type: 'boolean' })
  .describe('true or false');

/** A flag that is false unless given (said in words: JSON Schema's `default` of a transform is its output's). */
export const offFlag = flag.default(false).describe('true or false; false when not given');

/** What a cursor looks like on the wire: opaque base64url, at most 1,000 characters. */
export const CURSOR_PATTERN = /^[A-Za-z0-9_-]{1,1000}$/;

/** A page's `nextCursor`: opaque to clients, passed back as `?cursor=`. */
export const cursorText = z.string().regex(CURSOR_PATTERN, 'an opaque cursor (base64url)');

/** A keyset cursor: the sort key of the last item of the previous page, base64url JSON, decoded by `shape`. */
export function cursor<T extends z.ZodType>(shape: T) {
  return cursorText
    .max(1_000)
    .transform((text, ctx): z.output<T> => {
      let decoded: unknown;
      try {
        decoded = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
      } catch {
        decoded = undefined;
      }
      const parsed = shape.safeParse(decoded);
      if (!parsed.success) {
        ctx.addIssue({ code: 'custom', message: 'not a cursor this list returned' });
        return z.NEVER;
      }
      return parsed.data;
    })
    .describe('the nextCursor of the previous page');
}

export function encodeCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/** `nextCursor` of a page fetched with limit + 1: the last kept item's key when there was one more. */
export function pageOf<T>(rows: readonly T[], size: number, keyOf: (last: T) => unknown) {
  const items = rows.slice(0, size);
  const more = rows.length > size;
  return { items, nextCursor: more && items.length > 0 ? encodeCursor(keyOf(items.at(-1)!)) : null };
}

/** A uuid keyset component (lower-case, as PostgreSQL returns it). */
export const cursorUuid = z.uuid().transform((id) => id.toLowerCase());
export const cursorInstant = z.iso.datetime();
