/**
 * SMS campaign requests (inline create, preview, bulk metadata) and the pure pipeline that turns one
 * recipient into its frozen row: normalize the MSISDN, check its tags, route it, render the message, count
 * segments (ten at most) and price it. The seed's rules run in the seed's order; every rule broken is a
 * `RuleIssue` naming field and rule, `SmsValidationError` carries them all, and nothing is written. The
 * seed's first and last steps (the idempotency key, the deduction) are the service's. ADR 0014.
 */
import { z } from 'zod';
import { ValidationError } from '../../errors.js';
import { countSegments, MAX_SEGMENTS, type SmsEncoding } from './encoding.js';
import { formatUnits } from './money.js';
import { normalizeMsisdn, zoneForCountry } from './msisdn.js';
import { type RoutingTable, SMS_MESSAGE_TYPES, type SmsMessageType } from './routing.js';
import {
  type RuleIssue,
  recipientTagIssues,
  render,
  SMS_LANGS,
  type SmsLang,
  TEMPLATE_TYPES,
  type TemplateType,
  templateIssues,
  templateTags,
} from './template.js';
import {
  isInsideWindow,
  isValidTimezone,
  opensSomeDay,
  parseScheduledAt,
  type SendWindowPolicy,
  sendWindowPolicySchema,
  wallClock,
} from './windows.js';

/** Seed 003: POST /api/campaigns accepts 1–5,000 inline recipients. */
export const INLINE_MAX_RECIPIENTS = 5_000;
export const SCHEDULE_TYPES = ['INSTANT', 'SCHEDULED'] as const;
export type ScheduleType = (typeof SCHEDULE_TYPES)[number];

/** A ValidationError whose details name the field and rule of every broken rule. */
export class SmsValidationError extends ValidationError {
  constructor(readonly issues: readonly RuleIssue[]) {
    const first = issues[0]!;
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
    super(`invalid SMS campaign: ${first.field}: ${first.message} [${first.rule}]${more}`, {
      field: first.field,
      rule: first.rule,
      issues: issues.map((i) => ({ field: i.field, rule: i.rule, message: i.message })),
    });
  }
}

const text = (max: number) => z.string().trim().min(1).max(max);

/** Auto-pause bounds: a rate strictly between 0 and 1, over 10..10,000 reports. */
export const AUTO_PAUSE_WINDOW = { min: 10, max: 10_000 } as const;
export const autoPauseSchema = z.strictObject({
  maxFailureRate: z
    .number()
    .gt(0, 'must be more than 0 (a fraction: 0.2 = 20%)')
    .lt(1, 'must be less than 1 (a fraction: 0.2 = 20%)'),
  window: z
    .number()
    .int('must be a whole number of reports')
    .min(AUTO_PAUSE_WINDOW.min, `must be at least ${AUTO_PAUSE_WINDOW.min} reports`)
    .max(AUTO_PAUSE_WINDOW.max, `must be at most ${AUTO_PAUSE_WINDOW.max} reports`),
});
export type AutoPauseRule = z.infer<typeof autoPauseSchema>;

const common = {
  name: text(200),
  messageType: z.enum(SMS_MESSAGE_TYPES),
  lang: z.enum(SMS_LANGS),
  /** Seed 003's operator-approved campaignId (required for PROMOTIONAL). */
  campaignId: text(100).optional(),
  templateType: z.enum(TEMPLATE_TYPES),
  template: z.string().min(1).max(2_000),
  scheduleType: z.enum(SCHEDULE_TYPES).default('INSTANT'),
  /** Only for SCHEDULED; without an offset, a wall time in the campaign zone. */
  scheduledAt: z.string().min(1).max(40).optional(),
  /** Per-recipient send window, in each recipient's local time. */
  sendWindow: sendWindowPolicySchema.optional(),
  /**
   * Auto-pause on error rate (beyond the seed): pause the campaign when more than `maxFailureRate` of its
   * last `window` delivery reports failed. Resuming is an operator's decision.
   */
  autoPause: autoPauseSchema.optional(),
};

export const inlineRecipientSchema = z.strictObject({
  msisdn: z.string().min(1).max(32),
  tags: z.record(z.string().min(1).max(64), z.string().max(1_000)).optional(),
  /** IANA zone for the send window; default: the number's country's zone. */
  timezone: z.string().min(1).max(64).optional(),
});
export type InlineRecipient = z.infer<typeof inlineRecipientSchema>;

export const inlineCampaignRequestSchema = z.strictObject({
  ...common,
  recipients: z.array(inlineRecipientSchema).min(1).max(INLINE_MAX_RECIPIENTS),
});
export type InlineCampaignRequest = z.input<typeof inlineCampaignRequestSchema>;
export type ParsedInlineRequest = z.output<typeof inlineCampaignRequestSchema>;

/** The `meta` part of a bulk (CSV) upload. */
export const bulkCampaignMetaSchema = z.strictObject({ ...common, fileName: text(255).optional() });
export type BulkCampaignMeta = z.input<typeof bulkCampaignMetaSchema>;
export type ParsedBulkMeta = z.output<typeof bulkCampaignMetaSchema>;

export type CampaignDefinition = Omit<ParsedBulkMeta, 'fileName'>;

/** Settings the rules depend on (config.sms). */
export interface SmsRuleSettings {
  /** Campaign zone: scheduledAt without an offset, the promotional window, the fallback recipient zone. */
  readonly zone: string;
  /** Seed 003's BTRC window for promotional traffic, in `zone`. */
  readonly promotionalWindow: SendWindowPolicy;
  readonly minLeadMs: number;
  readonly maxFutureMs: number;
}

function ruleOf(issue: z.core.$ZodIssue, input: unknown): string {
  switch (issue.code) {
    case 'invalid_type':
      return valueAt(input, issue.path) === undefined ? 'required' : 'type';
    case 'too_small':
      return issue.origin === 'array' ? 'too-few' : 'too-short';
    case 'too_big':
      return issue.origin === 'array' ? 'too-many' : 'too-long';
    case 'invalid_value':
      return 'one-of';
    case 'unrecognized_keys':
      return 'unknown-field';
    case 'invalid_format':
      return 'format';
    default:
      return issue.code;
  }
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

function fieldOf(path: readonly PropertyKey[]): string {
  let field = '';
  for (const key of path)
    field += typeof key === 'number' ? `[${key}]` : field ? `.${String(key)}` : String(key);
  return field || '(body)';
}

/** zod issues as rule issues; an unknown field is named by its own path. */
export function zodRuleIssues(error: z.ZodError, input: unknown): RuleIssue[] {
  return error.issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({
        field: fieldOf([...issue.path, key]),
        rule: 'unknown-field',
        message: 'not a field of this request',
      }));
    }
    const field = fieldOf(issue.path);
    return [
      {
        field,
        rule: `${field
          .replace(/\[\d+\]/g, '')
          .split('.')
          .pop()}.${ruleOf(issue, input)}`,
        message: issue.message,
      },
    ];
  });
}

export function parseRequest<S extends z.ZodType>(schema: S, raw: unknown): z.output<S> {
  const result = schema.safeParse(raw);
  if (!result.success) throw new SmsValidationError(zodRuleIssues(result.error, raw));
  return result.data;
}

export interface CampaignRules {
  /** When dispatch may start (null: at once). */
  readonly startAt: string | null;
  readonly tags: readonly string[];
}

/**
 * Steps 3–4 for one `scheduledAt` (creation, and seed 003's reschedule, which validates a new time
 * exactly as at creation): an ISO-8601 date-time (without an offset: a wall time in the campaign zone),
 * at least the minimum lead and at most the maximum future date after `now`, inside the promotional
 * window for PROMOTIONAL traffic. `field` names it in the issue.
 */
export function scheduledAtRule(
  scheduledAt: string,
  messageType: SmsMessageType,
  now: number,
  settings: SmsRuleSettings,
  field = 'scheduledAt',
): { startAt: string } | { issue: RuleIssue } {
  const at = parseScheduledAt(scheduledAt, settings.zone);
  if (at === null) {
    return {
      issue: {
        field,
        rule: 'scheduledAt.format',
        message: `expected an ISO-8601 date-time (without an offset: local time in ${settings.zone})`,
      },
    };
  }
  if (at < now + settings.minLeadMs) {
    return {
      issue: {
        field,
        rule: 'scheduledAt.min-lead',
        message: `must be at least ${Math.round(settings.minLeadMs / 1000)} s after now`,
      },
    };
  }
  if (at > now + settings.maxFutureMs) {
    return {
      issue: {
        field,
        rule: 'scheduledAt.max-future',
        message: `must be at most ${Math.round(settings.maxFutureMs / 86_400_000)} days ahead`,
      },
    };
  }
  if (messageType === 'PROMOTIONAL' && !isInsideWindow(at, settings.zone, settings.promotionalWindow)) {
    const w = settings.promotionalWindow;
    return {
      issue: {
        field,
        rule: 'scheduledAt.outside-promotional-window',
        message: `PROMOTIONAL traffic is sent ${w.start}–${w.end} ${settings.zone} only (BTRC); ${wallClock(at, settings.zone)} is outside`,
      },
    };
  }
  return { startAt: new Date(at).toISOString() };
}

/** Steps 2–5 (and the send window): the rules that need only the campaign definition and the time. */
export function campaignRuleIssues(
  definition: CampaignDefinition,
  now: number,
  settings: SmsRuleSettings,
): { issues: RuleIssue[]; rules: CampaignRules } {
  const issues: RuleIssue[] = [];
  if (definition.messageType === 'PROMOTIONAL') {
    if (definition.lang !== 'bn') {
      issues.push({
        field: 'lang',
        rule: 'promotional.lang-bn',
        message: 'PROMOTIONAL campaigns must use lang=bn',
      });
    }
    if (!definition.campaignId) {
      issues.push({
        field: 'campaignId',
        rule: 'promotional.campaign-id-required',
        message: 'PROMOTIONAL campaigns need the operator-approved campaignId',
      });
    }
  }
  let startAt: string | null = null;
  if (definition.scheduleType === 'SCHEDULED') {
    if (definition.scheduledAt === undefined) {
      issues.push({
        field: 'scheduledAt',
        rule: 'scheduledAt.required',
        message: 'a SCHEDULED campaign needs scheduledAt',
      });
    } else {
      const checked = scheduledAtRule(definition.scheduledAt, definition.messageType, now, settings);
      if ('issue' in checked) issues.push(checked.issue);
      else startAt = checked.startAt;
    }
  } else if (definition.scheduledAt !== undefined) {
    issues.push({
      field: 'scheduledAt',
      rule: 'scheduledAt.only-for-scheduled',
      message: 'scheduledAt is only for scheduleType SCHEDULED',
    });
  }
  issues.push(...templateIssues(definition.template, definition.templateType, definition.lang));
  if (definition.sendWindow && !opensSomeDay(definition.sendWindow)) {
    issues.push({
      field: 'sendWindow',
      rule: 'sendWindow.never-opens',
      message: 'the send window opens on no day',
    });
  }
  return { issues, rules: { startAt, tags: templateTags(definition.template) } };
}

/** One recipient as frozen on its row (seed 003, step 9). */
export interface FrozenRecipient {
  readonly msisdn: string;
  readonly operator: string;
  readonly timezone: string;
  readonly tags: Readonly<Record<string, string>> | null;
  readonly content: string;
  readonly encoding: SmsEncoding;
  readonly segments: number;
  readonly sender: string;
  readonly channel: string;
  readonly mnoUser: string;
  readonly rate: string;
  readonly costUnits: number;
}

/** Why a CSV row was skipped (counted in rejectedCount by reason). */
export type RejectionReason =
  | 'invalid-msisdn'
  | 'duplicate'
  | 'invalid-tags'
  | 'no-route'
  | 'too-many-segments';

export interface RecipientContext {
  readonly templateType: TemplateType;
  readonly template: string;
  readonly tags: readonly string[];
  readonly lang: SmsLang;
  readonly routing: RoutingTable;
  /** Zone of recipients whose number's country has none (config.sms.zone). */
  readonly defaultZone: string;
}

export type PreparedRecipient =
  | { readonly ok: true; readonly recipient: FrozenRecipient }
  | { readonly ok: false; readonly reason: RejectionReason; readonly issues: RuleIssue[] };

const genericSegments = new WeakMap<RecipientContext, ReturnType<typeof countSegments>>();

/**
 * Steps 6–9 for one recipient (already normalized when `normalized` is given, as the CSV build does
 * to de-duplicate first). `field` names the recipient in issues (e.g. `recipients[3]`, `row 17`).
 */
export function prepareRecipient(
  field: string,
  input: { msisdn: string; tags?: Readonly<Record<string, string>> | null; timezone?: string | undefined },
  context: RecipientContext,
  normalized?: { msisdn: string; country: string },
): PreparedRecipient {
  const number = normalized ?? normalizeMsisdn(input.msisdn);
  if (!number) {
    return {
      ok: false,
      reason: 'invalid-msisdn',
      issues: [
        {
          field: `${field}.msisdn`,
          rule: 'msisdn.invalid',
          message: `'${input.msisdn}' is not a valid mobile number`,
        },
      ],
    };
  }
  const tagIssues = recipientTagIssues(field, context.tags, input.tags, context.templateType, context.lang);
  if (input.timezone !== undefined && !isValidTimezone(input.timezone)) {
    tagIssues.push({
      field: `${field}.timezone`,
      rule: 'timezone.unknown',
      message: `unknown time zone '${input.timezone}'`,
    });
  }
  if (tagIssues.length > 0) return { ok: false, reason: 'invalid-tags', issues: tagIssues };
  const route = context.routing.route(number.msisdn);
  if (!route) {
    return {
      ok: false,
      reason: 'no-route',
      issues: [
        {
          field: `${field}.msisdn`,
          rule: 'msisdn.no-route',
          message: `no operator or active route for ${number.msisdn}`,
        },
      ],
    };
  }
  const tags = context.templateType === 'PERSONALIZED' ? pick(input.tags ?? {}, context.tags) : null;
  const content = tags ? render(context.template, tags) : context.template;
  let counted = tags ? undefined : genericSegments.get(context);
  if (!counted) {
    counted = countSegments(content);
    if (!tags) genericSegments.set(context, counted);
  }
  if (counted.segments > MAX_SEGMENTS) {
    return {
      ok: false,
      reason: 'too-many-segments',
      issues: [
        {
          field: tags ? `${field}.tags` : 'template',
          rule: 'content.too-many-segments',
          message: `the message needs ${counted.segments} ${counted.encoding} segments; at most ${MAX_SEGMENTS}`,
        },
      ],
    };
  }
  return {
    ok: true,
    recipient: {
      msisdn: number.msisdn,
      operator: route.operator,
      timezone: input.timezone ?? zoneForCountry(number.country) ?? context.defaultZone,
      tags,
      content,
      encoding: counted.encoding,
      segments: counted.segments,
      sender: route.sender,
      channel: route.channel,
      mnoUser: route.mnoUser,
      rate: route.rate,
      costUnits: counted.segments * route.rateUnits,
    },
  };
}

function pick(values: Readonly<Record<string, string>>, tags: readonly string[]): Record<string, string> {
  return Object.fromEntries(tags.map((tag) => [tag, values[tag]!]));
}

/** Totals of frozen recipients. */
export function totals(recipients: readonly FrozenRecipient[]): {
  recipients: number;
  segments: number;
  cost: string;
} {
  let segments = 0;
  let cost = 0;
  for (const r of recipients) {
    segments += r.segments;
    cost += r.costUnits;
  }
  return { recipients: recipients.length, segments, cost: formatUnits(cost) };
}

export type { RuleIssue, SmsLang, SmsMessageType, TemplateType };
