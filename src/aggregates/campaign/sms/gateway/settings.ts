/**
 * `herald sms-gateway`'s settings (ADR 0022), a fragment of the campaign slice (`config.smsGateway`): the
 * SMSC connections (which route channels each serves, its binds, window, throughput and addressing) as
 * JSON, their passwords as a secret (`HERALD_SMS_GATEWAY_PASSWORDS_FILE` supported; scrubbed from logs),
 * and the timing of responses, keep-alives, reconnects, throttling and the unconfirmed sweep. A bad
 * value stops start-up naming the variable and the field (`HERALD_SMS_GATEWAY_SMSCS: [0].port: …`).
 */
import { z } from 'zod';
import { ConfigError } from '../../../../errors.js';
import { describeSetting as d, defineSettings } from '../../../../settings/fragment.js';
import { positiveInt } from '../../../../settings/validators.js';

const byte = z.number().int().min(0).max(255);

const smscSchema = z
  .object({
    name: z.string().regex(/^[a-zA-Z0-9._-]{1,64}$/, 'must be 1..64 of [a-zA-Z0-9._-]'),
    host: z.string().min(1),
    port: z.number().int().min(1).max(65_535),
    tls: z.boolean().default(false),
    systemId: z.string().min(1).max(15),
    systemType: z.string().max(12).default(''),
    /** Route channels (sms_route.channel) served by this SMSC; `*` serves any channel no other names. */
    channels: z.array(z.string().min(1)).min(1),
    binds: z
      .object({
        transceivers: z.number().int().min(0).max(32).default(0),
        transmitters: z.number().int().min(0).max(32).default(0),
        receivers: z.number().int().min(0).max(32).default(0),
      })
      .default({ transceivers: 1, transmitters: 0, receivers: 0 })
      .refine((b) => b.transceivers + b.transmitters > 0, 'needs at least one transceiver or transmitter')
      .refine(
        (b) => b.transceivers > 0 || b.receivers > 0,
        'needs a transceiver or a receiver (delivery receipts come on one)',
      ),
    /** Outstanding submit_sm without a response, per bind. */
    window: z.number().int().min(1).max(1_000).default(10),
    /** submit_sm per second per bind… */
    tpsPerBind: z.number().positive().max(100_000).default(50),
    /** …and for the whole route (all its binds; default: the sum of its binds'). */
    tps: z.number().positive().max(1_000_000).optional(),
    /** Source address TON/NPI; default: alphanumeric (5/0) for a sender with letters, international (1/1) otherwise. */
    sourceTon: byte.optional(),
    sourceNpi: byte.optional(),
    destTon: byte.default(1),
    destNpi: byte.default(1),
    /** Long messages: a user data header (default) or the SAR TLVs. */
    concatenation: z.enum(['udh', 'sar']).default('udh'),
    serviceType: z.string().max(5).default(''),
  })
  .strict();

export type SmscSettings = Readonly<z.output<typeof smscSchema>> & {
  readonly password: string;
  readonly tps: number;
};

/** Parses a JSON setting with `schema`, as a zod issue naming the JSON path. */
function json<S extends z.ZodType>(schema: S, example: string) {
  return z.string().transform((text, ctx): z.output<S> => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: `not JSON (${(error as Error).message}); e.g. ${example}` });
      return z.NEVER;
    }
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0]!;
    const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
    ctx.addIssue({ code: 'custom', message: `${path.replace(/^\./, '') || '(root)'}: ${issue.message}` });
    return z.NEVER;
  });
}

export interface SmsGatewaySettings {
  readonly smscs: readonly SmscSettings[];
  readonly responseTimeoutMs: number;
  readonly unconfirmedAfterMs: number;
  readonly enquireLinkMs: number;
  readonly connectTimeoutMs: number;
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
  readonly throttleBackoffMs: number;
  readonly throttleMaxBackoffMs: number;
  readonly maxResubmits: number;
  readonly resubmitDelayMs: number;
  readonly pollMs: number;
  readonly concurrency: number;
}

const EXAMPLE =
  '[{"name":"gp","host":"smsc.example","port":2775,"systemId":"herald","channels":["gp-smpp-1"],"binds":{"transceivers":2},"window":10,"tpsPerBind":100}]';

export const smsGatewaySettings = defineSettings({
  key: 'smsGateway',
  title: 'SMS gateway (SMPP)',
  env: {
    HERALD_SMS_GATEWAY_SMSCS: d(
      json(z.array(smscSchema), EXAMPLE).default([]),
      `\`herald sms-gateway\`'s SMSC connections, JSON: each \`name\`, \`host\`, \`port\`, \`tls\`, \`systemId\`, \`systemType\`, the route \`channels\` it serves (\`*\`: any other), \`binds\` (\`transceivers\`, or \`transmitters\` + \`receivers\`), \`window\` (outstanding submit_sm per bind, 10), \`tpsPerBind\` (50) and \`tps\` (the route's, default their sum), \`sourceTon\`/\`sourceNpi\` (default by sender), \`destTon\`/\`destNpi\` (1/1), \`concatenation\` (\`udh\` or \`sar\`), \`serviceType\`. E.g. \`${EXAMPLE}\``,
      '`[]`',
    ),
    HERALD_SMS_GATEWAY_PASSWORDS: d(
      json(z.record(z.string(), z.string().max(8)), '{"gp":"secret"}').default({}),
      'each SMSC connection\'s bind password by its name, JSON (`{"gp":"secret"}`); a secret (`HERALD_SMS_GATEWAY_PASSWORDS_FILE` reads it from a file)',
      '`{}`',
    ),
    HERALD_SMS_GATEWAY_RESPONSE_TIMEOUT_SECONDS: d(
      positiveInt.max(600).default(30),
      'a submit_sm (enquire_link, unbind) unanswered this long is given up: the part becomes UNCONFIRMED (never resent); an unanswered enquire_link drops the bind',
    ),
    HERALD_SMS_GATEWAY_UNCONFIRMED_AFTER_SECONDS: d(
      positiveInt.max(86_400).default(120),
      'a part marked sending this long ago without a recorded answer (its gateway died or lost the bind before recording) is UNCONFIRMED by any gateway; must exceed the response timeout',
    ),
    HERALD_SMS_GATEWAY_ENQUIRE_LINK_SECONDS: d(
      positiveInt.max(3_600).default(30),
      'enquire_link keep-alive interval per bind',
    ),
    HERALD_SMS_GATEWAY_CONNECT_TIMEOUT_SECONDS: d(
      positiveInt.max(600).default(10),
      'connect + bind must answer within this long',
    ),
    HERALD_SMS_GATEWAY_RECONNECT_MIN_MS: d(
      positiveInt.default(1_000),
      'first wait before re-binding a lost bind (doubling, with jitter)…',
    ),
    HERALD_SMS_GATEWAY_RECONNECT_MAX_MS: d(positiveInt.default(30_000), '…up to this'),
    HERALD_SMS_GATEWAY_THROTTLE_BACKOFF_MS: d(
      positiveInt.default(1_000),
      'ESME_RTHROTTLED: the bind pauses this long (doubling while throttling goes on) and halves its rate; the part is sent again, never failed',
    ),
    HERALD_SMS_GATEWAY_THROTTLE_MAX_BACKOFF_MS: d(positiveInt.default(30_000), 'the longest throttle pause'),
    HERALD_SMS_GATEWAY_MAX_RESUBMITS: d(
      z.coerce.number().int().min(0).max(100).default(3),
      'a retryable submit_sm_resp status (queue full, system error, …) re-sends the part this many times before the recipient is reported FAILED (then the campaign retry decides)',
    ),
    HERALD_SMS_GATEWAY_RESUBMIT_DELAY_MS: d(
      positiveInt.default(5_000),
      'wait before re-sending a part after a retryable status',
    ),
    HERALD_SMS_GATEWAY_POLL_MS: d(
      positiveInt.max(60_000).default(250),
      'an idle bind looks for queued parts this often (a chunk consumed in the same process wakes it at once)',
    ),
    HERALD_SMS_GATEWAY_CONCURRENCY: d(
      positiveInt.max(64).default(4),
      'submit-topic partitions (or, over RabbitMQ, deliveries) the gateway consumes at once',
    ),
  },
  secretVariables: ['HERALD_SMS_GATEWAY_PASSWORDS'],
  secrets: (e) => Object.values(e.HERALD_SMS_GATEWAY_PASSWORDS).filter((p) => p.length > 0),
  map(e): SmsGatewaySettings {
    const names = new Set<string>();
    const smscs = e.HERALD_SMS_GATEWAY_SMSCS.map((smsc, index) => {
      if (names.has(smsc.name)) {
        throw new ConfigError('HERALD_SMS_GATEWAY_SMSCS', `[${index}].name: ${smsc.name} is used twice`);
      }
      names.add(smsc.name);
      const binds = smsc.binds.transceivers + smsc.binds.transmitters;
      return {
        ...smsc,
        password: e.HERALD_SMS_GATEWAY_PASSWORDS[smsc.name] ?? '',
        tps: smsc.tps ?? smsc.tpsPerBind * binds,
      };
    });
    const channels = new Map<string, string>();
    for (const smsc of smscs) {
      for (const channel of smsc.channels) {
        const other = channels.get(channel);
        if (other) {
          throw new ConfigError(
            'HERALD_SMS_GATEWAY_SMSCS',
            `channel ${channel} is served by both ${other} and ${smsc.name}`,
          );
        }
        channels.set(channel, smsc.name);
      }
    }
    for (const name of Object.keys(e.HERALD_SMS_GATEWAY_PASSWORDS)) {
      if (!names.has(name))
        throw new ConfigError('HERALD_SMS_GATEWAY_PASSWORDS', `${name}: no such SMSC connection`);
    }
    const responseTimeoutMs = e.HERALD_SMS_GATEWAY_RESPONSE_TIMEOUT_SECONDS * 1000;
    const unconfirmedAfterMs = e.HERALD_SMS_GATEWAY_UNCONFIRMED_AFTER_SECONDS * 1000;
    if (unconfirmedAfterMs <= responseTimeoutMs) {
      throw new ConfigError(
        'HERALD_SMS_GATEWAY_UNCONFIRMED_AFTER_SECONDS',
        `must exceed HERALD_SMS_GATEWAY_RESPONSE_TIMEOUT_SECONDS (${e.HERALD_SMS_GATEWAY_RESPONSE_TIMEOUT_SECONDS}): a live bind is still waiting for its answer until then`,
      );
    }
    if (e.HERALD_SMS_GATEWAY_RECONNECT_MAX_MS < e.HERALD_SMS_GATEWAY_RECONNECT_MIN_MS) {
      throw new ConfigError(
        'HERALD_SMS_GATEWAY_RECONNECT_MAX_MS',
        'must not be below HERALD_SMS_GATEWAY_RECONNECT_MIN_MS',
      );
    }
    return {
      smscs,
      responseTimeoutMs,
      unconfirmedAfterMs,
      enquireLinkMs: e.HERALD_SMS_GATEWAY_ENQUIRE_LINK_SECONDS * 1000,
      connectTimeoutMs: e.HERALD_SMS_GATEWAY_CONNECT_TIMEOUT_SECONDS * 1000,
      reconnectMinMs: e.HERALD_SMS_GATEWAY_RECONNECT_MIN_MS,
      reconnectMaxMs: e.HERALD_SMS_GATEWAY_RECONNECT_MAX_MS,
      throttleBackoffMs: e.HERALD_SMS_GATEWAY_THROTTLE_BACKOFF_MS,
      throttleMaxBackoffMs: Math.max(
        e.HERALD_SMS_GATEWAY_THROTTLE_MAX_BACKOFF_MS,
        e.HERALD_SMS_GATEWAY_THROTTLE_BACKOFF_MS,
      ),
      maxResubmits: e.HERALD_SMS_GATEWAY_MAX_RESUBMITS,
      resubmitDelayMs: e.HERALD_SMS_GATEWAY_RESUBMIT_DELAY_MS,
      pollMs: e.HERALD_SMS_GATEWAY_POLL_MS,
      concurrency: e.HERALD_SMS_GATEWAY_CONCURRENCY,
    };
  },
});

/** The SMSC connection serving a route channel: the one naming it, else the one with `*`. */
export function smscFor(smscs: readonly SmscSettings[], channel: string): SmscSettings | undefined {
  return smscs.find((s) => s.channels.includes(channel)) ?? smscs.find((s) => s.channels.includes('*'));
}
