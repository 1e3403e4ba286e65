/**
 * What the API refuses before validating a request (issue 23): input that PostgreSQL cannot store or that
 * recursive code cannot walk would otherwise fail deep inside a command as a 500. A string or key holding
 * NUL (text and jsonb store none) or a lone UTF-16 surrogate (not a Unicode scalar sequence: jsonb refuses
 * `\ud800`), JSON nested deeper than MAX_JSON_DEPTH, and a key that only serves prototype pollution
 * (`__proto__`, or `constructor` holding a `prototype`) are answered 422 naming the field. The walk is
 * iterative, so a body 100,000 levels deep costs a loop, not the stack. Before that, `parseJsonBody`
 * (the API's JSON body parser) refuses bytes that are not UTF-8 with a 400 naming their offset, instead
 * of reading them as U+FFFD.
 */
import { HttpProblem } from './problem.js';

/** The deepest JSON the API accepts (objects and arrays within each other, the request's top level being 1). */
export const MAX_JSON_DEPTH = 64;

export interface UnstorableInput {
  /** `body.name`, `params.subjectId`, `body.actionConfig.a.b` (where the nesting went too deep). */
  field: string;
  reason: string;
}

/** The first field of `input` the API cannot take, in document order, or undefined. */
export function unstorableField(input: unknown, maxDepth = MAX_JSON_DEPTH): UnstorableInput | undefined {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: input, path: '', depth: 0 }];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      const reason = stringProblem(value);
      if (reason) return { field: path, reason: `contains ${reason}` };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth > maxDepth) return { field: path, reason: `is nested deeper than ${maxDepth} levels` };
    const entries = Object.entries(value);
    // Pushed in reverse so the first field is looked at first.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i]!;
      const at = path ? (Array.isArray(value) ? `${path}[${key}]` : `${path}.${key}`) : key;
      const reason = stringProblem(key);
      if (reason) return { field: at, reason: `has a key that contains ${reason}` };
      if (key === '__proto__' || (key === 'constructor' && hasPrototypeKey(item))) {
        return { field: at, reason: `is a ${key} key, refused: it serves only prototype pollution` };
      }
      stack.push({ value: item, path: at, depth: depth + 1 });
    }
  }
  return undefined;
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function stringProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'a NUL character';
  if (LONE_SURROGATE.test(value)) return 'a lone UTF-16 surrogate (not valid Unicode)';
  return undefined;
}

const hasPrototypeKey = (value: unknown): boolean =>
  value !== null && typeof value === 'object' && Object.hasOwn(value, 'prototype');

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The API's `application/json` body parser: the bytes must be UTF-8 (RFC 8259) — anything else is a 400
 * `invalid-utf8` naming the first bad byte's offset — and then JSON (a 400 `malformed-json` with the
 * parser's reason). `JSON.parse` makes a `"__proto__"` key an own property (never the prototype), which
 * `unstorableField` then refuses by name.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    const at = invalidUtf8At(bytes);
    throw new HttpProblem(
      400,
      'INVALID_UTF8',
      at >= 0
        ? `body is not valid UTF-8: byte 0x${bytes[at]!.toString(16).padStart(2, '0')} at offset ${at} does not start a valid sequence`
        : 'body is not valid UTF-8',
      { errors: [{ field: 'body', message: 'not valid UTF-8' }] },
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new HttpProblem(400, 'MALFORMED_JSON', `body is not valid JSON: ${(error as Error).message}`, {
      errors: [{ field: 'body', message: 'not valid JSON' }],
    });
  }
}

/** The offset of the first byte that does not start a well-formed UTF-8 sequence (Unicode 15, table 3-7), or -1. */
export function invalidUtf8At(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    const trailing =
      lead >= 0xc2 && lead <= 0xdf
        ? 1
        : lead >= 0xe0 && lead <= 0xef
          ? 2
          : lead >= 0xf0 && lead <= 0xf4
            ? 3
            : 0;
    if (trailing === 0 || i + trailing >= bytes.length) return i;
    for (let k = 1; k <= trailing; k++) if ((bytes[i + k]! & 0xc0) !== 0x80) return i;
    const second = bytes[i + 1]!;
    // Overlong forms, UTF-16 surrogates (U+D800..U+DFFF) and code points above U+10FFFF.
    if (
      (lead === 0xe0 && second < 0xa0) ||
      (lead === 0xed && second > 0x9f) ||
      (lead === 0xf0 && second < 0x90) ||
      (lead === 0xf4 && second > 0x8f)
    ) {
      return i;
    }
    i += trailing + 1;
  }
  return -1;
}
