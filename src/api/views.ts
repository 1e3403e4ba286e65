/**
 * The API's generic response views (the outbox, keys, replay, verify, dispatch statistics) and what
 * every slice's views are built with: thin zod schemas used for serialization (Fastify encodes every
 * response through its route's schema) and for the OpenAPI document. A slice's views (its `views.ts`)
 * list exactly its state's fields (`sameKeys` fails to compile when a state gains or loses one), with
 * the domain's own enums; times are canonical ISO-8601 UTC strings.
 */
import { z } from 'zod';
import { API_KEY_ROLES } from './auth.js';
import { cursorText } from './schemas.js';

export const instant = z.iso.datetime().describe('ISO-8601, UTC');
export const json = z.record(z.string(), z.unknown());

/** Fails to compile unless View's keys are exactly State's keys (so no field is silently dropped). */
export type SameKeys<State, View> = [
  Exclude<keyof State, keyof View>,
  Exclude<keyof View, keyof State>,
] extends [never, never]
  ? true
  : { missingInView: Exclude<keyof State, keyof View>; notInState: Exclude<keyof View, keyof State> };
export const sameKeys = <T extends true>(_check: T) => _check;

export const outboxRowView = z
  .object({
    id: z.number().int(),
    messageId: z.uuid(),
    eventPosition: z.number().int(),
    sink: z.enum(['amqp', 'kafka']),
    destination: z.string(),
    routingKey: z.string().nullable(),
    partitionKey: z.string().nullable(),
    headers: json,
    payload: z.unknown(),
    priority: z.number().int(),
    status: z.enum(['pending', 'sent', 'dead', 'skipped']),
    attempts: z.number().int(),
    nextAttemptAt: z
      .string()
      .describe("ISO-8601, or 'infinity' for an ordered row waiting behind its key's head"),
    lastError: z.string().nullable(),
    createdAt: instant,
    sentAt: instant.nullable(),
    deadAt: instant.nullable(),
    skippedAt: instant.nullable(),
    recoveryCount: z.number().int(),
    ordered: z.boolean(),
  })
  .meta({ id: 'OutboxRow' });

export const parkedKeyView = z
  .object({
    id: z.number().int().describe('the dead head row'),
    messageId: z.uuid(),
    sink: z.enum(['amqp', 'kafka']),
    destination: z.string(),
    partitionKey: z.string(),
    attempts: z.number().int(),
    recoveryCount: z.number().int(),
    lastError: z.string().nullable(),
    deadAt: instant,
    waiting: z.number().int().describe('rows waiting behind the head'),
  })
  .meta({ id: 'ParkedKey' });

export const apiKeyView = z
  .object({
    id: z.uuid(),
    organizationId: z.string(),
    role: z.enum(API_KEY_ROLES),
    name: z.string(),
    prefix: z.string().describe('the non-secret head of the key, to recognise it'),
    createdAt: instant,
    createdBy: z.string().nullable(),
    revokedAt: instant.nullable(),
    lastUsedAt: instant.nullable().describe('recorded at most once a minute'),
  })
  .meta({ id: 'ApiKey' });

export const createdApiKeyView = z
  .object({
    apiKey: apiKeyView,
    key: z.string().describe('the secret: shown this once, stored only as a hash'),
  })
  .meta({ id: 'CreatedApiKey' });

const traceEvent = z.object({
  position: z.number().int(),
  tx: z.string(),
  version: z.number().int(),
  type: z.string(),
  data: z.unknown(),
  meta: json,
  recordedAt: instant,
});

const receiptView = z.object({
  outcome: z.string(),
  destination: z.string(),
  recordedAt: instant,
});

/** `history`: the stream's replay (src/projections/replay.ts) — events, causal chains, state. */
export const replayView = z
  .object({
    streamType: z.string(),
    streamId: z.string(),
    version: z.number().int(),
    events: z.array(traceEvent),
    commands: z.array(
      z.object({
        tx: z.string(),
        correlationId: z.string().nullable(),
        causationId: z.string().nullable(),
        actor: z.string().nullable(),
        pod: z.string().nullable(),
        recordedAt: instant,
        versions: z.array(z.number().int()),
        messages: z.array(
          z.object({
            messageId: z.string(),
            eventVersion: z.number().int(),
            eventPosition: z.number().int(),
            sink: z.string(),
            destination: z.string(),
            outbox: json.nullable().describe('the outbox row, while retention keeps it'),
            receipts: z.array(receiptView.catchall(z.unknown())),
            inbox: z.array(json),
            effects: z.array(json),
          }),
        ),
      }),
    ),
    state: z.unknown(),
  })
  .meta({ id: 'StreamReplay' });

export const verifyView = z
  .object({
    organizationId: z.string(),
    ok: z.boolean().describe("no drift in this organization's streams"),
    streamTypes: z.array(z.string()),
    streams: z.number().int().describe("the organization's streams verified"),
    events: z.number().int().describe('their events folded'),
    driftedStreams: z.number().int(),
    drifts: z.array(
      z.object({
        kind: z.string(),
        streamType: z.string(),
        streamId: z.string(),
        field: z.string().nullable(),
        row: z.unknown(),
        replay: z.unknown(),
        firstDifferingEvent: z
          .object({
            version: z.number().int(),
            position: z.number().int(),
            type: z.string(),
            recordedAt: instant,
          })
          .nullable(),
        detail: z.string(),
      }),
    ),
    truncated: z.boolean(),
    ms: z.number(),
  })
  .meta({ id: 'VerifyReport' });

export const statsView = z
  .object({
    from: instant,
    to: instant,
    rows: z.array(
      z.object({
        hour: instant,
        destination: z.string(),
        claimed: z.number().int(),
        published: z.number().int(),
        delivered: z.number().int(),
        discarded: z.number().int(),
        failed: z.number().int(),
        dead: z.number().int(),
      }),
    ),
  })
  .meta({ id: 'DispatchStats' });

/** A page of a list: the items and the cursor of the next page (null: this was the last). */
export function page<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      items: z.array(item),
      nextCursor: cursorText
        .nullable()
        .describe('opaque: pass as ?cursor= for the next page; null on the last page'),
    })
    .meta({ id });
}

/**
 * A domain value typed as its view's output. The states are deeply readonly and their JSON fields are
 * typed more narrowly than a view can say; the keys are checked above (SameKeys) and every response
 * is encoded through its view at run time, so a value that does not fit is a 500, never a silent leak.
 */
/**
 * The `commands` field of a view: the operations of the aggregate's catalogue (src/domain/operations.ts)
 * its current state allows, computed by the server (`availableOperations`), so a client shows exactly
 * the commands it may send.
 */
export function operationsField<Name extends string>(catalogue: Readonly<Record<Name, unknown>>) {
  return z
    .array(z.enum(Object.keys(catalogue) as [Name, ...Name[]]))
    .describe('the operations the current state allows (the dashboard shows these commands)');
}

export function view<S extends z.ZodType>(_schema: S, value: unknown): z.output<S> {
  return value as z.output<S>;
}

/** Dates (replay, receipts) as ISO strings: JSON carries no Date, and the views expect strings. */
export function plainJson<T>(value: T): unknown {
  return JSON.parse(JSON.stringify(value));
}
