/**
 * A LINE campaign's content and delivery facts (seed 000 on the real Messaging API, ADR 0021). Content is
 * LINE message objects (1..5 per call), validated here with zod in the shapes of LINE's OpenAPI document
 * (the adapter checks at compile time that they are the SDK's `messagingApi.Message`). Delivery is planned
 * once per campaign: chunk k's retry key is derived from the campaign, the *plan's* epoch and k, so a
 * redelivery, a restart or a reclaim under a later epoch re-sends an unrecorded chunk with the same key
 * and LINE answers 409 instead of delivering twice. Chunks are recorded in order; at most one chunk (the
 * next) is ever in doubt, and it is given up as unconfirmed rather than re-sent once its key may have
 * outlived LINE's 24 h validity. Pure data and functions.
 */
import { v5 as uuidv5 } from 'uuid';
import { z } from 'zod';

/** LINE: a multicast takes at most 500 user ids. */
export const LINE_MULTICAST_MAX = 500;
/** LINE: at most 5 message objects per call. */
export const LINE_MAX_MESSAGES = 5;
/**
 * LINE keeps an accepted retry key for 24 h. An unrecorded chunk is re-sent only while the time since it
 * could first have been sent is below this (one hour of margin for clock skew between Herald and LINE).
 */
export const LINE_RETRY_KEY_SAFE_MS = 23 * 3_600_000;
/** The namespace of Herald's LINE retry keys (UUID v5 of `<campaign>:<plan epoch>:<chunk>`). */
export const LINE_RETRY_KEY_NAMESPACE = '6f1c3a52-3f0e-5d6b-9a7e-2d7f4c8b1e90';

const https = z.url({ protocol: /^https$/ }).max(2000);
const label = z.string().min(1).max(20);

const action = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('uri'), label: label.optional(), uri: z.url().max(1000) }),
  z.strictObject({ type: z.literal('message'), label: label.optional(), text: z.string().min(1).max(300) }),
  z.strictObject({
    type: z.literal('postback'),
    label: label.optional(),
    data: z.string().min(1).max(300),
    displayText: z.string().min(1).max(300).optional(),
  }),
]);
export type LineAction = z.infer<typeof action>;

/** Flex components (the subset Herald's editor writes; LINE's OpenAPI validates the rest at the test server). */
export type LineFlexComponent =
  | {
      type: 'box';
      layout: 'horizontal' | 'vertical' | 'baseline';
      contents: LineFlexComponent[];
      spacing?: string;
    }
  | { type: 'text'; text: string; size?: string; weight?: 'regular' | 'bold'; wrap?: boolean; color?: string }
  | { type: 'image'; url: string; size?: string; aspectRatio?: string; aspectMode?: 'fit' | 'cover' }
  | { type: 'button'; action: LineAction; style?: 'primary' | 'secondary' | 'link' }
  | { type: 'separator' };

const flexComponent: z.ZodType<LineFlexComponent> = z
  .lazy(() =>
    z.discriminatedUnion('type', [
      z.strictObject({
        type: z.literal('box'),
        layout: z.enum(['horizontal', 'vertical', 'baseline']),
        contents: z.array(flexComponent),
        spacing: z.string().optional(),
      }),
      z.strictObject({
        type: z.literal('text'),
        text: z.string().min(1),
        size: z.string().optional(),
        weight: z.enum(['regular', 'bold']).optional(),
        wrap: z.boolean().optional(),
        color: z.string().optional(),
      }),
      z.strictObject({
        type: z.literal('image'),
        url: https,
        size: z.string().optional(),
        aspectRatio: z.string().optional(),
        aspectMode: z.enum(['fit', 'cover']).optional(),
      }),
      z.strictObject({
        type: z.literal('button'),
        action,
        style: z.enum(['primary', 'secondary', 'link']).optional(),
      }),
      z.strictObject({ type: z.literal('separator') }),
    ]),
  )
  .meta({ id: 'LineFlexComponent' });

const box = z.strictObject({
  type: z.literal('box'),
  layout: z.enum(['horizontal', 'vertical', 'baseline']),
  contents: z.array(flexComponent),
  spacing: z.string().optional(),
});

const bubble = z.strictObject({
  type: z.literal('bubble'),
  size: z.enum(['nano', 'micro', 'deca', 'hecto', 'kilo', 'mega', 'giga']).optional(),
  header: box.optional(),
  hero: flexComponent.optional(),
  body: box.optional(),
  footer: box.optional(),
});

const templateColumn = z.strictObject({
  thumbnailImageUrl: https.optional(),
  title: z.string().min(1).max(40).optional(),
  text: z.string().min(1).max(120),
  actions: z.array(action).min(1).max(3),
});

const template = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('buttons'),
    thumbnailImageUrl: https.optional(),
    title: z.string().min(1).max(40).optional(),
    text: z.string().min(1).max(160),
    actions: z.array(action).min(1).max(4),
  }),
  z.strictObject({
    type: z.literal('confirm'),
    text: z.string().min(1).max(240),
    actions: z.array(action).length(2),
  }),
  z.strictObject({ type: z.literal('carousel'), columns: z.array(templateColumn).min(1).max(10) }),
]);

export const lineMessageSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text'), text: z.string().min(1).max(5000) }),
  z.strictObject({ type: z.literal('sticker'), packageId: z.string().min(1), stickerId: z.string().min(1) }),
  z.strictObject({ type: z.literal('image'), originalContentUrl: https, previewImageUrl: https }),
  z.strictObject({ type: z.literal('video'), originalContentUrl: https, previewImageUrl: https }),
  z.strictObject({
    type: z.literal('audio'),
    originalContentUrl: https,
    duration: z.number().int().positive(),
  }),
  z.strictObject({
    type: z.literal('location'),
    title: z.string().min(1).max(100),
    address: z.string().min(1).max(100),
    latitude: z.number().min(-90).max(90),
    longitude: z.number().min(-180).max(180),
  }),
  z.strictObject({
    type: z.literal('flex'),
    altText: z.string().min(1).max(1500),
    contents: z.discriminatedUnion('type', [
      bubble,
      z.strictObject({ type: z.literal('carousel'), contents: z.array(bubble).min(1).max(12) }),
    ]),
  }),
  z.strictObject({ type: z.literal('template'), altText: z.string().min(1).max(400), template }),
]);
export type LineMessage = z.infer<typeof lineMessageSchema>;

export const lineContentSchema = z.array(lineMessageSchema).min(1).max(LINE_MAX_MESSAGES);

/** A LINE campaign's facts as the API shows them (the state's own shape). */
export const lineFactsView = z.object({
  messages: lineContentSchema,
  plan: z
    .object({
      epoch: z.number().int(),
      chunks: z.number().int(),
      recipients: z.number().int().nullable(),
      plannedAt: z.string(),
    })
    .nullable()
    .describe('fixed at the first delivery attempt; its epoch keys every chunk’s X-Line-Retry-Key'),
  progress: z.object({
    chunksDone: z.number().int(),
    chunksAccepted: z.number().int(),
    recipientsAccepted: z.number().int(),
    chunksUnconfirmed: z.number().int(),
    recipientsUnconfirmed: z.number().int(),
    duplicates: z.number().int().describe('calls LINE answered 409: accepted earlier under the same key'),
    failedCalls: z.number().int(),
    cursor: z.string().nullable(),
    inDoubtSince: z.string().nullable(),
    lastRequestId: z.string().nullable(),
    lastError: z
      .object({
        status: z.number().int().nullable(),
        kind: z.string(),
        message: z.string(),
        requestId: z.string().nullable(),
      })
      .nullable(),
  }),
});

/** The delivery plan, fixed at the first delivery attempt and kept across reclaims and resends. */
export interface LinePlan {
  /** The claim epoch the plan was made under: part of every chunk's retry key. */
  readonly epoch: number;
  /** Calls the delivery takes: ceil(members / 500) for a multicast, 1 for a broadcast or narrowcast. */
  readonly chunks: number;
  /** Recipients planned (the sealed audience's size; null for a broadcast or narrowcast). */
  readonly recipients: number | null;
  readonly plannedAt: string;
}

export interface LineProgress {
  /** Chunks done in order (accepted or given up as unconfirmed): the next chunk's index. */
  readonly chunksDone: number;
  readonly chunksAccepted: number;
  readonly recipientsAccepted: number;
  /** Chunks (and their recipients) that may or may not have reached LINE and were not re-sent. */
  readonly chunksUnconfirmed: number;
  readonly recipientsUnconfirmed: number;
  /** Calls answered 409 (accepted earlier under the same key). */
  readonly duplicates: number;
  /** Failed calls (throttled, transient or refused). */
  readonly failedCalls: number;
  /** The last user id of the last done chunk: the next chunk starts after it. */
  readonly cursor: string | null;
  /** When chunk `chunksDone` was known not to have been sent yet (the plan, or the previous chunk's record). */
  readonly inDoubtSince: string | null;
  readonly lastRequestId: string | null;
  /** The last refusal (LINE's status, message and details), kept for the operator. */
  readonly lastError: {
    status: number | null;
    kind: string;
    message: string;
    requestId: string | null;
  } | null;
}

export interface LineCampaignFacts {
  readonly messages: LineMessage[];
  readonly plan: LinePlan | null;
  readonly progress: LineProgress;
}

export const EMPTY_LINE_PROGRESS: LineProgress = {
  chunksDone: 0,
  chunksAccepted: 0,
  recipientsAccepted: 0,
  chunksUnconfirmed: 0,
  recipientsUnconfirmed: 0,
  duplicates: 0,
  failedCalls: 0,
  cursor: null,
  inDoubtSince: null,
  lastRequestId: null,
  lastError: null,
};

export function newLineFacts(messages: LineMessage[]): LineCampaignFacts {
  return { messages, plan: null, progress: EMPTY_LINE_PROGRESS };
}

/** Chunks a delivery takes. */
export function plannedChunks(castType: 'broadcast' | 'multicast' | 'narrowcast', members: number): number {
  return castType === 'multicast' ? Math.ceil(members / LINE_MULTICAST_MAX) : 1;
}

/** The retry key of chunk `chunk` of the plan made under `planEpoch`: the same on every attempt. */
export function lineRetryKey(campaignId: string, planEpoch: number, chunk: number): string {
  return uuidv5(`${campaignId.toLowerCase()}:${planEpoch}:${chunk}`, LINE_RETRY_KEY_NAMESPACE);
}

export function lineDeliveryDone(facts: LineCampaignFacts): boolean {
  return facts.plan !== null && facts.progress.chunksDone >= facts.plan.chunks;
}

/**
 * Whether the next chunk must be given up as unconfirmed: it may have been sent (and accepted) before a
 * crash, and a re-send now might fall outside LINE's 24 h key validity and deliver a second time.
 */
export function nextChunkKeyExpired(facts: LineCampaignFacts, now: Date): boolean {
  const since = facts.progress.inDoubtSince;
  return since !== null && now.getTime() - Date.parse(since) >= LINE_RETRY_KEY_SAFE_MS;
}

/** A short, human text of a message list (CLI and dashboard summaries). */
export function describeLineContent(messages: readonly LineMessage[]): string {
  return messages
    .map((m) =>
      m.type === 'text' ? `text "${m.text.length > 40 ? `${m.text.slice(0, 39)}…` : m.text}"` : m.type,
    )
    .join(', ');
}
