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

/**
 * One URL, or several separated by commas (a cluster's nodes, ADR 0037), all with the same one of
 * `protocols` (a list mixing TLS and plain text would make the connection's security depend on which
 * node answers first).
 */
export const urlList = (protocols: string[]) =>
  z.string().superRefine((value, context) => {
    const parts = value.split(',').map((part) => part.trim());
    const expected = `must start with ${protocols.map((p) => `${p}://`).join(' or ')}`;
    for (const [index, part] of parts.entries()) {
      const ok =
        z.string().url().safeParse(part).success && protocols.some((p) => part.startsWith(`${p}://`));
      if (!ok) {
        const message = parts.length > 1 ? `URL ${index + 1} of ${parts.length} ${expected}` : expected;
        context.addIssue({ code: 'custom', message });
        return;
      }
    }
    const schemes = new Set(parts.map((part) => part.slice(0, part.indexOf('://'))));
    if (schemes.size > 1) {
      context.addIssue({
        code: 'custom',
        message: `the URLs must share one scheme, got ${[...schemes].join(' and ')}`,
      });
    }
  });

/** `true`/`false` (or `1`/`0`), as a boolean. */
export const flag = (defaultValue: 'true' | 'false') =>
  z
    .enum(['true', 'false', '1', '0'], "must be 'true' or 'false'")
    .default(defaultValue)
    .transform((value) => value === 'true' || value === '1');

/** A Kafka topic or RabbitMQ queue name. */
export const topicName = z.string().regex(/^[a-zA-Z0-9._-]{1,200}$/, 'must be 1..200 of [a-zA-Z0-9._-]');
