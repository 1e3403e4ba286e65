/**
 * What the OpenAPI document says that a route's validation schemas cannot: a request body the route
 * reads itself (the bulk upload's multipart parts, which Fastify must not validate as a body), and the
 * live stream's `text/event-stream` grammar. Each is a per-route `swaggerTransform` or a schema, so it
 * changes the document only, never what the server accepts. ADR 0027.
 */
import type { SwaggerTransform } from '@fastify/swagger';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';

/**
 * A route's `config.swaggerTransform` documenting `body` as its request body in `mediaType` without
 * Fastify validating it (the handler parses such a body itself: multipart parts, streamed).
 */
export function documentedBody(body: z.ZodType, mediaType: string): SwaggerTransform {
  return (input) =>
    jsonSchemaTransform({
      ...input,
      schema: { ...input.schema, body, consumes: [mediaType] },
    } as Parameters<typeof jsonSchemaTransform>[0]);
}

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The live stream as the server writes it (src/api/stream.ts): frames separated by a blank line, each
 * a `retry:` line, comment lines (`: connected`, `: heartbeat`) or an event of one of `topics` whose
 * data is `{"at": ISO-8601}`. The pattern matches any whole number of frames, so a client (and the
 * conformance test) can check what it received up to its last blank line.
 */
export function eventStreamSchema(topics: readonly string[]) {
  const instant = '\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,9})?Z';
  const event = `event: (?:${topics.map(literal).join('|')})\\ndata: \\{"at":"${instant}"\\}\\n`;
  const line = `(?:retry: \\d+\\n|: [^\\n]*\\n|${event})`;
  return z
    .string()
    .regex(new RegExp(`^(?:${line}+\\n)*$`))
    .describe(
      `Server-Sent Events, UTF-8: \`event: <topic>\` (one of ${topics.join(', ')}) with \`data: {"at": "<ISO-8601>"}\` when something of that topic changed; a \`retry: 5000\` line and \`: connected\` first, \`: heartbeat\` comments while idle.`,
    )
    .meta({ contentMediaType: 'text/event-stream' });
}

interface DocumentWithPaths {
  paths?: object;
}

const OPERATION_METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']);

/**
 * What the router answers before any route runs, on the operations it concerns: a path parameter over
 * `maxParamLength` characters is a 414 problem document on every operation with one.
 */
export function withRouterErrors<T extends DocumentWithPaths>(document: T, maxParamLength: number): T {
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    if (!path.includes('{') || !item) continue;
    for (const [method, operation] of Object.entries(item as Record<string, unknown>)) {
      if (!OPERATION_METHODS.has(method)) continue;
      const responses = (operation as { responses?: Record<string, unknown> }).responses;
      if (!responses || responses['414']) continue;
      responses['414'] = {
        description: `a path parameter is longer than ${maxParamLength} characters`,
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      };
    }
  }
  return document;
}
