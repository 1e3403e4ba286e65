/**
 * The LINE directory over HTTP (ADR 0021): an organization registers its official accounts' channels
 * (a long-lived token, or client id and secret; admin keys only; sealed on arrival and never answered
 * back) and builds multicast audiences (create, upload user ids in pages of up to 10,000, seal). A LINE
 * campaign is sent only once its channel and its sealed audience are in place (the readiness check).
 * Every write is idempotent by its nature (a registration replaces, repeated members are ignored, a seal
 * of a sealed audience answers it), so no Idempotency-Key is needed; another organization's channel or
 * audience is a 404 like a missing one.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../../../api/http.js';
import type { RouteDeps } from '../../../api/module.js';
import { commandProblems, readProblems } from '../../../api/routes/common.js';
import { cursor, limit, pageOf } from '../../../api/schemas.js';
import { page, view } from '../../../api/views.js';
import type { CampaignServices } from '../routes.js';
import {
  lineAudienceMembersSchema,
  lineAudienceView,
  lineChannelView,
  newLineAudienceSchema,
  newLineChannelSchema,
} from './directory.js';

const oaParams = z.strictObject({ lineOaId: z.string().min(1).max(100).describe('the official account id') });
const audienceParams = z.strictObject({ audienceId: z.string().min(1).max(100).describe('the audience id') });
const channelList = z.object({ items: z.array(lineChannelView) }).meta({ id: 'LineChannelList' });
const audiencePage = page(lineAudienceView, 'LineAudiencePage');
const audienceListQuery = z.strictObject({ limit, cursor: cursor(z.string()).optional() });
// Named once, here: a `.meta({ id })` inside the plugin registered another copy under the same id each time
// an app was built, and the OpenAPI components of a second app in one process came out under other names.
const newChannelBody = newLineChannelSchema.meta({ id: 'NewLineChannel' });
const newAudienceBody = newLineAudienceSchema.meta({ id: 'NewLineAudience' });
const audienceMembersBody = lineAudienceMembersSchema.meta({ id: 'LineAudienceMembers' });
const TAGS = ['line'];

export const lineRoutes: FastifyPluginAsyncZod<RouteDeps<CampaignServices>> = async (app, { commands }) => {
  const directory = () => commands.readers.line;

  app.post(
    '/line/channels',
    {
      config: { permission: 'admin' },
      schema: {
        tags: TAGS,
        summary:
          "Register an official account's LINE channel, or replace its credentials (sealed; never answered back)",
        body: newChannelBody,
        response: { 201: lineChannelView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const { organizationId } = principalOf(request);
      const channel = await directory().registerChannel({ ...request.body, organizationId });
      return reply
        .code(201)
        .header('location', `/v1/line/channels/${encodeURIComponent(channel.lineOaId)}`)
        .send(view(lineChannelView, channel));
    },
  );

  app.get(
    '/line/channels',
    {
      schema: {
        tags: TAGS,
        summary: "The organization's LINE channels (no token, no secret)",
        response: { 200: channelList, ...readProblems },
      },
    },
    async (request) => ({ items: await directory().listChannels(principalOf(request).organizationId) }),
  );

  app.get(
    '/line/channels/:lineOaId',
    {
      schema: {
        tags: TAGS,
        summary: 'One LINE channel (no token, no secret)',
        params: oaParams,
        response: { 200: lineChannelView, ...readProblems },
      },
    },
    async (request) => directory().getChannel(request.params.lineOaId, principalOf(request).organizationId),
  );

  app.delete(
    '/line/channels/:lineOaId',
    {
      config: { permission: 'admin' },
      schema: {
        tags: TAGS,
        summary: 'Remove a LINE channel (its campaigns are refused until one is registered again)',
        params: oaParams,
        response: { 200: lineChannelView, ...commandProblems },
      },
    },
    async (request) =>
      directory().removeChannel(request.params.lineOaId, principalOf(request).organizationId),
  );

  app.post(
    '/line/audiences',
    {
      schema: {
        tags: TAGS,
        summary: 'Create an empty multicast audience (409 if the id is taken)',
        body: newAudienceBody,
        response: { 201: lineAudienceView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const { organizationId } = principalOf(request);
      const audience = await directory().createAudience({ ...request.body, organizationId });
      return reply
        .code(201)
        .header('location', `/v1/line/audiences/${encodeURIComponent(audience.audienceId)}`)
        .send(audience);
    },
  );

  app.post(
    '/line/audiences/:audienceId/members',
    {
      schema: {
        tags: TAGS,
        summary:
          'Add up to 10,000 LINE user ids to an unsealed audience (repeats are ignored; 409 once sealed)',
        params: audienceParams,
        body: audienceMembersBody,
        response: { 200: lineAudienceView, ...commandProblems },
      },
      bodyLimit: 1024 * 1024,
    },
    async (request) =>
      directory().addMembers(
        request.params.audienceId,
        request.body.userIds,
        principalOf(request).organizationId,
      ),
  );

  app.post(
    '/line/audiences/:audienceId/seal',
    {
      schema: {
        tags: TAGS,
        summary:
          'Seal an audience: it never changes again, and multicast campaigns may use it (409 when empty)',
        params: audienceParams,
        response: { 200: lineAudienceView, ...commandProblems },
      },
    },
    async (request) =>
      directory().sealAudience(request.params.audienceId, principalOf(request).organizationId),
  );

  app.get(
    '/line/audiences/:audienceId',
    {
      schema: {
        tags: TAGS,
        summary: 'One audience: its size and whether it is sealed',
        params: audienceParams,
        response: { 200: lineAudienceView, ...readProblems },
      },
    },
    async (request) =>
      directory().getAudience(request.params.audienceId, principalOf(request).organizationId),
  );

  app.get(
    '/line/audiences',
    {
      schema: {
        tags: TAGS,
        summary: "The organization's audiences, by id",
        querystring: audienceListQuery,
        response: { 200: audiencePage, ...readProblems },
      },
    },
    async (request) => {
      const { limit: size, cursor: after } = request.query;
      const rows = await directory().listAudiences(
        principalOf(request).organizationId,
        after ?? null,
        size + 1,
      );
      return pageOf(rows, size, (last) => last.audienceId);
    },
  );
};
