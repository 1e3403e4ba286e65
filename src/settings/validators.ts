/**
 * The validators settings fragments share (src/settings/core.ts and each slice's `settings`), so the
 * same kind of variable is refused with the same message wherever it is declared.
 */
import { z } from 'zod';

export const identifier = z
  .string()
  .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lowercase SQL identifier (a-z, 0-9, _; at most 63 chars)');
export const positiveInt = z.coerce.number().int().positive();
export const nonNegativeInt = z.coerce.number().int().nonnegative();

export const url = (protocols: string[]) =>
  z
    .string()
    .url()
    .refine((value) => protocols.some((p) => value.startsWith(`${p}://`)), {
      message: `must start with ${protocols.map((p) => `${p}://`).join(' or ')}`,
    });

/** `true`/`false` (or `1`/`0`), as a boolean. */
export const flag = (defaultValue: 'true' | 'false') =>
  z
    .enum(['true', 'false', '1', '0'], "must be 'true' or 'false'")
    .default(defaultValue)
    .transform((value) => value === 'true' || value === '1');

/** A Kafka topic or RabbitMQ queue name. */
export const topicName = z.string().regex(/^[a-zA-Z0-9._-]{1,200}$/, 'must be 1..200 of [a-zA-Z0-9._-]');
