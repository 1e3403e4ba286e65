/**
 * What the API refuses before validating a request (issue 23): input that PostgreSQL cannot store or that
 * recursive code cannot walk would otherwise fail deep inside a command as a 500. A string or key holding
 * NUL (text and jsonb store none) or a lone UTF-16 surrogate (not a Unicode scalar sequence: jsonb refuses
 * `\ud800`), and JSON nested deeper than MAX_JSON_DEPTH, are answered 422 naming the field. The walk is
 * iterative, so a body 100,000 levels deep costs a loop, not the stack.
 */

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
