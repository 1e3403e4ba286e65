/**
 * SMS campaigns over HTTP (seed 003, part 1; ADR 0014): `POST /v1/campaigns` with `channel: "sms"` (the
 * campaign routes hand such a body to `createSmsCampaign`), `POST /v1/campaigns/preview`, and `POST
 * /v1/campaigns/bulk` (multipart: a `meta` JSON field, then the CSV `file`), and resend with its
 * preview. Thin: each calls the SmsCampaignService and answers its result with the route's status
 * (201, 202, 200). The service reserves the request's Idempotency-Key itself (src/api/idempotency.ts,
 * the same scope and fingerprint as every other command): the seed's inline create spans an external
 * charge, so it cannot run in the request's one transaction as other commands do; a concurrent retry
 * is 409 with `Retry-After: 2`, a refused charge 402, a billing service that did not answer 502 with
 * `Retry-After: 2` (retryable with the same key).
 */
import multipart from '@fastify/multipart';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { owned, principalOf, REPLAY_HEADER, requestKeyOf, sendCommand } from '../../../api/http.js';
import { unstorableField } from '../../../api/input-limits.js';
import type { RouteDeps } from '../../../api/module.js';
import { documentedBody } from '../../../api/openapi.js';
import {
  chargeProblems,
  commandProblems,
  IDEMPOTENCY_HEADER_DOC,
  idempotencyHeaders,
  readProblems,
} from '../../../api/routes/common.js';
import { uuidParams } from '../../../api/schemas.js';
import { CAMPAIGN_STATUSES } from '../../../domain/campaign/status.js';
import {
  bulkCampaignMetaSchema,
  inlineCampaignRequestSchema,
  SmsValidationError,
} from '../../../domain/sms/campaign-request.js';
import type { CampaignServices } from '../routes.js';
import type { CampaignConfig } from '../settings.js';
import { campaignOut, campaignView } from '../views.js';
import type { SmsCampaignService } from './service.js';

/** The SMS variant of `POST /v1/campaigns` (seed 003's inline create, 1–5,000 recipients). */
export const smsCampaignBody = inlineCampaignRequestSchema
  .extend({ channel: z.literal('sms') })
  .meta({ id: 'NewSmsCampaign' });
export type SmsCampaignBody = z.output<typeof smsCampaignBody>;

/** `POST /v1/campaigns` with an SMS body: 201 with the QUEUED or SCHEDULED campaign, charged once. */
export async function createSmsCampaign(
  sms: SmsCampaignService,
  request: FastifyRequest,
  reply: FastifyReply,
  body: SmsCampaignBody,
): Promise<FastifyReply> {
  const principal = principalOf(request);
  const { channel: _channel, ...fields } = body;
  const result = await sms.create(fields, {
    organizationId: principal.organizationId,
    meta: { actor: principal.actor, correlationId: request.id },
    idempotency: requestKeyOf(request),
  });
  if (result.replayed) void reply.header(REPLAY_HEADER, 'true');
  return reply
    .code(201)
    .header('location', `/v1/campaigns/${result.body.campaignId}`)
    .send(campaignOut(result.body));
}

const money = z.string().describe('BDT, four decimals');
const previewView = z
  .object({
    messageType: z.enum(['PROMOTIONAL', 'TRANSACTIONAL']),
    lang: z.enum(['bn', 'en']),
    startAt: z.iso.datetime().nullable(),
    recipients: z.number().int(),
    segments: z.number().int(),
    totalCost: money,
    byOperator: z.array(
      z.object({
        operator: z.string(),
        recipients: z.number().int(),
        segments: z.number().int(),
        cost: money,
      }),
    ),
    messages: z.array(
      z.object({
        msisdn: z.string(),
        operator: z.string(),
        timezone: z.string(),
        content: z.string(),
        encoding: z.enum(['GSM7', 'UCS2']),
        segments: z.number().int(),
        sender: z.string(),
        channel: z.string(),
        rate: money,
        cost: money,
      }),
    ),
  })
  .meta({ id: 'SmsCampaignPreview' });

const uploadView = z
  .object({
    id: z.uuid(),
    status: z
      .enum(['PENDING', 'IN_PROGRESS', 'CHARGING', 'DONE', 'FAILED'])
      .describe(
        'CHARGING: every row saved, the charge unanswered by billing and retried with its key (`error` says why)',
      ),
    fileName: z.string().nullable(),
    sizeBytes: z.number().int(),
    sha256: z.string(),
    rowsRead: z.number().int(),
    acceptedCount: z.number().int(),
    rejectedCount: z.number().int(),
    rejectedByReason: z.record(z.string(), z.number().int()),
    rejectedRows: z
      .array(
        z.object({
          line: z.number().int().describe("the row's line in the file (1-based)"),
          value: z.string().describe('its MSISDN cell as written (at most 64 characters)'),
          reason: z.string().describe('as in rejectedByReason: invalid-msisdn, duplicate, no-route, …'),
        }),
      )
      .describe('the first 100 rejected rows; rejectedByReason counts them all'),
    attempt: z.number().int().describe('build attempts so far (HERALD_SMS_BUILD_MAX_ATTEMPTS at most)'),
    error: z
      .string()
      .nullable()
      .describe(
        "why the build failed (FAILED: the parser's message and line, a refused charge, the last attempt's error), why its last attempt failed (IN_PROGRESS, retried), or why its charge waits (CHARGING)",
      ),
    finishedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'SmsCampaignUpload' });
/** The bulk upload's body as documented (the handler reads the parts itself, in this order). */
const bulkUploadBody = z
  .object({
    meta: bulkCampaignMetaSchema
      .meta({ id: 'SmsBulkCampaignMeta' })
      .describe('the campaign (JSON, the first part): name, template, schedule, send window, fileName'),
    file: z
      .string()
      .meta({ contentMediaType: 'text/csv' })
      .describe(
        'the recipients (UTF-8 CSV, the second part): GENERIC one column of MSISDNs with an optional header; PERSONALIZED a header with msisdn and every tag',
      ),
  })
  .meta({ id: 'SmsBulkUpload' });

const bulkCreatedView = z
  .object({ campaign: campaignView, upload: uploadView })
  .meta({ id: 'SmsBulkCampaign' });

/** Errors of @fastify/multipart and its parser (busboy) about the body itself. */
function isMultipartError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return (
    (typeof code === 'string' && code.startsWith('FST_')) ||
    /multipart|boundary|unexpected end of form/i.test(error.message)
  );
}

const resendPreviewView = z
  .object({
    campaignId: z.uuid(),
    status: z.enum(CAMPAIGN_STATUSES),
    recipients: z.number().int().describe('failed recipients that would be sent again'),
    cost: money.describe("what the resend would charge: the failed recipients' saved cost"),
    currentResendAttempt: z.number().int(),
    nextResendAttempt: z.number().int(),
    chargeKey: z.string().describe('the ledger key of the resend charge'),
    refundsPending: z
      .number()
      .int()
      .describe('failed recipients whose refund is not recorded yet: a resend is refused (409) until 0'),
  })
  .meta({ id: 'SmsResendPreview' });
const resendBody = z.strictObject({ reason: z.string().trim().min(1).max(1_000).optional() }).nullish();

export const smsCampaignRoutes: FastifyPluginAsyncZod<RouteDeps<CampaignServices, CampaignConfig>> = async (
  app,
  { commands, config },
) => {
  const sms = commands.readers.sms;

  app.get(
    '/campaigns/:id/upload',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          "A CSV campaign's upload: its build's status, attempts, rows read, accepted and rejected (by reason, and the first 100 rejected rows with their line), and why it failed",
        params: uuidParams,
        response: { 200: uploadView, ...readProblems },
      },
      config: { permission: 'read' },
    },
    async (request) => {
      const { id } = request.params;
      await owned('campaign', id, principalOf(request), () => commands.readers.campaigns.get(id));
      return sms.upload(id);
    },
  );

  app.post(
    '/campaigns/:id/resend/preview',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          "Preview a resend of an SMS campaign's failed recipients: how many, what it would cost, refunds pending; nothing is charged",
        params: uuidParams,
        response: { 200: resendPreviewView, ...commandProblems },
      },
      config: { permission: 'read' },
    },
    async (request) =>
      sms.resendPreview(request.params.id, { organizationId: principalOf(request).organizationId }),
  );

  app.post(
    '/campaigns/:id/resend',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          "Resend a PARTIAL or FAILED campaign: an SMS campaign's failed recipients, charged their cost once with the key campaign:{id}:resend:{n}; a FAILED LINE campaign's chunks not yet accepted, under their planned retry keys. Then QUEUED",
        description: `${IDEMPOTENCY_HEADER_DOC} Errors: 409 naming the status, or while refunds are still pending; 402 when the balance does not cover the resend (nothing changes); 502 with \`Retry-After: 2\` when billing did not answer (nothing changes; a retry charges the same key once).`,
        headers: idempotencyHeaders,
        params: uuidParams,
        body: resendBody,
        response: { 200: campaignView, ...chargeProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const reason = request.body?.reason;
      const { id } = request.params;
      const campaign = await owned('campaign', id, principal, () => commands.readers.campaigns.get(id));
      if (campaign.channel === 'line') {
        // A LINE campaign resends its chunks not yet accepted, under their planned retry keys (ADR 0021).
        return sendCommand(commands, request, reply, async (s, meta) => ({
          status: 200,
          body: campaignOut(await s.campaigns.resend(id, reason, meta)),
        }));
      }
      const result = await sms.resend(request.params.id, reason ? { reason } : {}, {
        organizationId: principal.organizationId,
        meta: { actor: principal.actor, correlationId: request.id },
        idempotency: requestKeyOf(request),
      });
      if (result.replayed) void reply.header(REPLAY_HEADER, 'true');
      return reply.code(200).send(campaignOut(result.body));
    },
  );

  // Only in this plugin's scope: the other routes keep refusing multipart bodies.
  await app.register(multipart, {
    limits: { files: 1, fields: 1, fieldSize: 64 * 1024, fileSize: config.sms.bulkMaxBytes + 1 },
  });

  app.post(
    '/campaigns/preview',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          'Preview an SMS campaign: validate, render, route and price every recipient; nothing is written',
        body: inlineCampaignRequestSchema.extend({ channel: z.literal('sms').optional() }),
        response: { 200: previewView, ...commandProblems },
      },
      config: { permission: 'read' },
    },
    async (request) => {
      const { channel: _channel, ...fields } = request.body;
      return sms.preview(fields, { organizationId: principalOf(request).organizationId });
    },
  );

  app.post(
    '/campaigns/bulk',
    {
      schema: {
        tags: ['campaigns'],
        summary: 'Create a CSV SMS campaign (multipart: `meta`, then `file`); 202 with the BUILDING campaign',
        description:
          'multipart/form-data with two parts, in this order: `meta` (JSON: name, messageType PROMOTIONAL, lang bn, campaignId, templateType, template, scheduleType, scheduledAt, sendWindow, fileName) and `file` (UTF-8 CSV; GENERIC: one column of MSISDNs, an optional header; PERSONALIZED: a header with msisdn and every tag). `herald worker` builds and charges it. The Idempotency-Key fingerprint covers the metadata and the file. ' +
          IDEMPOTENCY_HEADER_DOC +
          ' Errors: 422 naming the field and the rule (`errors[].rule`) with nothing written (a body that is not multipart, a missing or malformed part, metadata breaking a rule, a file over HERALD_SMS_BULK_MAX_BYTES: `file.too-large`); 409 with `Retry-After: 2` while a request with the same Idempotency-Key is in progress. The file is charged when `herald worker` builds it, not here.',
        headers: idempotencyHeaders,
        response: { 202: bulkCreatedView, ...commandProblems },
      },
      // Documented, not validated: the parts are streamed to the handler (the file is never buffered).
      config: { swaggerTransform: documentedBody(bulkUploadBody, 'multipart/form-data') },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      if (!request.isMultipart()) {
        throw new SmsValidationError([
          {
            field: '(body)',
            rule: 'body.multipart',
            message: 'expected multipart/form-data with meta and file',
          },
        ]);
      }
      let meta: unknown;
      let result: Awaited<ReturnType<SmsCampaignService['createBulk']>> | undefined;
      try {
        for await (const part of request.parts()) {
          if (part.type === 'field' && part.fieldname === 'meta' && result === undefined) {
            try {
              meta = JSON.parse(String(part.value));
            } catch {
              throw new SmsValidationError([
                { field: 'meta', rule: 'meta.json', message: 'meta must be a JSON object' },
              ]);
            }
            // The part is JSON the /v1 hook never saw: what PostgreSQL cannot store or recursion cannot
            // walk (NUL, a lone surrogate, nesting past the limit, a prototype-pollution key) is refused
            // here, naming the field, before anything validates or fingerprints it.
            const refused = unstorableField(meta);
            if (refused) {
              const field = refused.field ? `meta.${refused.field}` : 'meta';
              throw new SmsValidationError([
                { field, rule: 'meta.unstorable', message: `${field} ${refused.reason}` },
              ]);
            }
          } else if (
            part.type === 'file' &&
            part.fieldname === 'file' &&
            meta !== undefined &&
            result === undefined
          ) {
            try {
              result = await sms.createBulk(meta, part.file, {
                organizationId: principal.organizationId,
                meta: { actor: principal.actor, correlationId: request.id },
                idempotency: requestKeyOf(request, { body: meta, params: {}, query: request.query }),
              });
            } finally {
              part.file.resume(); // whatever was not read (a refused request) is discarded
            }
          } else if (part.type === 'file') {
            part.file.resume();
          }
        }
      } catch (error) {
        // A malformed or oversized multipart body is the client's (no boundary, truncated, too many parts).
        if (!isMultipartError(error)) throw error;
        throw new SmsValidationError([
          {
            field: '(body)',
            rule: 'body.multipart',
            message: `malformed multipart body: ${(error as Error).message}`,
          },
        ]);
      }
      if (!result) {
        throw new SmsValidationError([
          meta === undefined
            ? { field: 'meta', rule: 'meta.required', message: 'the meta part (JSON) must come first' }
            : { field: 'file', rule: 'file.required', message: 'the file part (CSV) is missing' },
        ]);
      }
      if (result.replayed) void reply.header(REPLAY_HEADER, 'true');
      return reply
        .code(202)
        .header('location', `/v1/campaigns/${result.body.campaign.campaignId}`)
        .send({ ...result.body, campaign: campaignOut(result.body.campaign) });
    },
  );
};
