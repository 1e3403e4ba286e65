/** Turns a zod failure into the ValidationError every Herald caller branches on (never zod's own error). */
import type { z } from 'zod';
import { ValidationError } from '../errors.js';

export function validationErrorFrom(
  what: string,
  raw: unknown,
  issues: readonly z.core.$ZodIssue[],
): ValidationError {
  const type =
    typeof raw === 'object' && raw !== null && 'type' in raw && typeof raw.type === 'string'
      ? raw.type
      : what;
  const reasons = issues.map((issue) => `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`);
  return new ValidationError(`invalid ${type}: ${reasons.join('; ')}`, {
    type,
    issues: issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })),
  });
}
