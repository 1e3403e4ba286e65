/**
 * The LINE test server: real HTTP speaking the Messaging API calls Herald makes (broadcast, multicast,
 * narrowcast, quota, short-lived token issue and verify). Every request is checked against LINE's
 * OpenAPI documents (contract.ts); a violation is a 400 in LINE's error shape and is recorded, so a test
 * can assert there were none. It enforces LINE's retry-key contract (an ACCEPTED key answers 409 with
 * `x-line-accepted-request-id` for 24 h and counts nobody again) and plays the failures a test asks for
 * (channel-state.ts), over an in-process API and a control HTTP API under `/_simulator/`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Logger } from '../../../../logger.js';
import {
  ChannelState,
  LINE_ENDPOINTS,
  type LineBehaviour,
  type LineChannelOptions,
  type LineEndpoint,
  type LineRequestRecord,
  type LineViolation,
  MONTHLY_LIMIT_MESSAGE,
  RATE_LIMIT_MESSAGE,
} from './channel-state.js';
import {
  CHANNEL_ACCESS_TOKEN_DOCUMENT,
  type LineErrorDetail,
  LineOpenApiContract,
  MESSAGING_API_DOCUMENT,
  type OperationContract,
} from './contract.js';

export interface LineSimulatorOptions {
  host?: string;
  /** 0 (default): a free port. */
  port?: number;
  /** The clock of the retry-key window, token expiry, behaviours' `forMs` and the rate windows. */
  now?: () => number;
  logger?: Logger;
  /** Where LINE's OpenAPI documents are; default: test/contract/line-openapi/ of the repository. */
  openapiDir?: string;
  /** Lifetime of a token issued by `/v2/oauth/accessToken`; LINE's short-lived tokens last 30 days. */
  issuedTokenTtlSeconds?: number;
  channels?: readonly LineChannelOptions[];
}

/** An accepted call, as `beforeRespond` sees it: recorded, not yet answered. */
export interface LineAcceptedCall {
  channelId: string;
  endpoint: LineEndpoint;
  requestId: string;
  retryKey: string | null;
  recipients: number;
  /** A multicast's user ids. */
  to: readonly string[] | null;
  /** A narrowcast's audience group ids. */
  audienceGroupIds: readonly number[];
  /** The message objects sent (as validated against the OpenAPI document). */
  messages: readonly unknown[];
}
export type BeforeRespondHook = (call: LineAcceptedCall) => void | Promise<void>;

export interface LineChannelSummary {
  channelId: string;
  requestCount: number;
  accepted: number;
  /** Calls answered 409 (retry key already accepted). */
  duplicates: number;
  /** Calls answered 429 (rate, behaviour or quota). */
  throttled: number;
  /** Receipts counted by accepted calls (a user twice counts twice). */
  recipientsDelivered: number;
  distinctRecipients: number;
  usersReceivedMoreThanOnce: number;
  broadcasts: number;
  narrowcastAudiences: readonly number[];
  /** The most requests seen in one one-second window, per endpoint (answered or refused). */
  maxObservedRate: Partial<Record<LineEndpoint, number>>;
  violations: number;
}
export interface LineChannelStats extends LineChannelSummary {
  requests: readonly LineRequestRecord[];
  /** Oldest request records dropped to bound memory (counters are exact regardless). */
  requestsDropped: number;
}
export interface LineSimulatorStats {
  channels: Record<string, LineChannelSummary>;
  violationCount: number;
  /** The first violations (at most 1,000 are kept; the count is exact). */
  violations: readonly LineViolation[];
  /** Requests answered 401 for an unknown token. */
  unauthenticated: number;
}

export interface LineSimulator {
  /** `http://host:port`: the base URL for the SDK's `baseURL`. */
  readonly url: string;
  /** Registers a channel, or updates its settings (its records are kept). */
  addChannel(options: LineChannelOptions): void;
  behave(channelId: string, behaviour: LineBehaviour): void;
  clearBehaviours(channelId: string): void;
  /** Runs after a call was accepted and recorded, before its response is written (null: none). */
  beforeRespond(hook: BeforeRespondHook | null): void;
  stats(): LineSimulatorStats;
  stats(channelId: string): LineChannelStats;
  timesReceived(channelId: string, userId: string): number;
  usersReceivedMoreThanOnce(channelId: string): string[];
  distinctRecipients(channelId: string): number;
  readonly violationCount: number;
  violations(): readonly LineViolation[];
  /** Forgets every record, retry key, issued token and behaviour; channels stay registered. */
  reset(): void;
  close(): Promise<void>;
}

const THIRTY_DAYS_SECONDS = 30 * 24 * 60 * 60;
const MAX_VIOLATIONS_KEPT = 1000;
const contracts = new Map<string, LineOpenApiContract>();

function contractFor(dir: string | undefined): LineOpenApiContract {
  const key = dir ?? '';
  let contract = contracts.get(key);
  if (!contract) {
    contract = dir === undefined ? new LineOpenApiContract() : new LineOpenApiContract(dir);
    contracts.set(key, contract);
  }
  return contract;
}

const SEND_PATHS = {
  broadcast: '/v2/bot/message/broadcast',
  multicast: '/v2/bot/message/multicast',
  narrowcast: '/v2/bot/message/narrowcast',
} as const;
const GET_PATHS = {
  quota: '/v2/bot/message/quota',
  'quota-consumption': '/v2/bot/message/quota/consumption',
} as const;

const endpointSchema = z.enum(LINE_ENDPOINTS as [LineEndpoint, ...LineEndpoint[]]);
const scope = {
  calls: z.number().int().positive().optional(),
  forMs: z.number().int().positive().optional(),
  endpoints: z.array(endpointSchema).optional(),
};
const behaviourSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('throttle'),
    retryAfterSeconds: z.number().int().nonnegative().optional(),
    message: z.string().optional(),
    ...scope,
  }),
  z.object({
    kind: z.literal('server-error'),
    status: z.number().int().min(500).max(599).optional(),
    message: z.string().optional(),
    ...scope,
  }),
  z.object({
    kind: z.literal('reject'),
    status: z.number().int().min(400).max(499).optional(),
    message: z.string().optional(),
    details: z.array(z.object({ message: z.string(), property: z.string() })).optional(),
    ...scope,
  }),
  z.object({ kind: z.literal('unauthorized'), ...scope }),
  z.object({ kind: z.literal('quota-exhausted'), ...scope }),
  z.object({
    kind: z.literal('stall'),
    ms: z.number().int().nonnegative().optional(),
    beforeAccept: z.boolean().optional(),
    ...scope,
  }),
]);
const channelSchema = z.object({
  channelId: z.string().min(1),
  tokens: z.array(z.string().min(1)).optional(),
  clientId: z.string().min(1).optional(),
  clientSecret: z.string().min(1).optional(),
  friends: z.array(z.string()).optional(),
  audiences: z.record(z.string(), z.array(z.string())).optional(),
  rateLimits: z.partialRecord(endpointSchema, z.number().positive()).optional(),
  monthlyQuota: z.number().int().nonnegative().optional(),
});

function flatHeaders(request: FastifyRequest): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The body as the operation declares it (JSON or form), with what is wrong with its framing. */
function parseBody(
  contract: OperationContract,
  request: FastifyRequest,
): { body: unknown; details: LineErrorDetail[] } {
  const raw = request.body as Buffer | undefined;
  if (contract.mediaType === null || raw === undefined || raw.length === 0) {
    return { body: undefined, details: [] };
  }
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== contract.mediaType) {
    return {
      body: undefined,
      details: [{ message: `must be ${contract.mediaType}`, property: 'Content-Type' }],
    };
  }
  const text = raw.toString('utf8');
  if (contract.mediaType === 'application/x-www-form-urlencoded') {
    return { body: Object.fromEntries(new URLSearchParams(text)), details: [] };
  }
  try {
    return { body: JSON.parse(text), details: [] };
  } catch {
    return { body: undefined, details: [{ message: 'The request body is not valid JSON', property: '' }] };
  }
}

/** The audience group ids named anywhere in a narrowcast's recipient tree. */
function audienceIds(recipient: unknown, into: number[] = []): number[] {
  if (typeof recipient !== 'object' || recipient === null) return into;
  const node = recipient as Record<string, unknown>;
  if (node.type === 'audience' && typeof node.audienceGroupId === 'number') into.push(node.audienceGroupId);
  for (const key of ['and', 'or']) {
    const children = node[key];
    if (Array.isArray(children)) for (const child of children) audienceIds(child, into);
  }
  if (node.not !== undefined) audienceIds(node.not, into);
  return into;
}

export async function startLineSimulator(options: LineSimulatorOptions = {}): Promise<LineSimulator> {
  const now = options.now ?? Date.now;
  const logger = options.logger;
  const contract = contractFor(options.openapiDir);
  const tokenTtlSeconds = options.issuedTokenTtlSeconds ?? THIRTY_DAYS_SECONDS;
  const channels = new Map<string, ChannelState>();
  const longLivedTokens = new Map<string, string>();
  const issuedTokens = new Map<string, { channelId: string; expiresAt: number }>();
  const violations: LineViolation[] = [];
  let violationCount = 0;
  let unauthenticated = 0;
  let hook: BeforeRespondHook | null = null;
  let closing = false;
  const holds = new Set<() => void>();

  const operations = {
    broadcast: contract.operation(MESSAGING_API_DOCUMENT, 'post', SEND_PATHS.broadcast),
    multicast: contract.operation(MESSAGING_API_DOCUMENT, 'post', SEND_PATHS.multicast),
    narrowcast: contract.operation(MESSAGING_API_DOCUMENT, 'post', SEND_PATHS.narrowcast),
    quota: contract.operation(MESSAGING_API_DOCUMENT, 'get', GET_PATHS.quota),
    'quota-consumption': contract.operation(MESSAGING_API_DOCUMENT, 'get', GET_PATHS['quota-consumption']),
    issue: contract.operation(CHANNEL_ACCESS_TOKEN_DOCUMENT, 'post', '/v2/oauth/accessToken'),
    verify: contract.operation(CHANNEL_ACCESS_TOKEN_DOCUMENT, 'post', '/v2/oauth/verify'),
  } satisfies Record<LineEndpoint | 'issue' | 'verify', OperationContract>;

  const channel = (channelId: string): ChannelState => {
    const state = channels.get(channelId);
    if (!state) throw new Error(`line simulator: unknown channel ${channelId}`);
    return state;
  };

  const addChannel = (input: LineChannelOptions) => {
    const existing = channels.get(input.channelId);
    if (existing) {
      for (const token of existing.options.tokens ?? []) longLivedTokens.delete(token);
      existing.options = input;
    } else channels.set(input.channelId, new ChannelState(input));
    for (const token of input.tokens ?? []) longLivedTokens.set(token, input.channelId);
  };
  for (const input of options.channels ?? []) addChannel(input);

  const recordViolation = (
    channelId: string | null,
    endpoint: string,
    requestId: string,
    details: LineErrorDetail[],
  ) => {
    violationCount += 1;
    if (violations.length < MAX_VIOLATIONS_KEPT) {
      violations.push({ at: now(), channelId, endpoint, requestId, details });
    }
    if (channelId) channels.get(channelId)!.violations += 1;
    logger?.warn({ channelId, endpoint, requestId, details }, 'line simulator: contract violation');
  };

  /** Resolves true after `ms` (absent: never), false as soon as the simulator closes. */
  const hold = (ms: number | undefined): Promise<boolean> =>
    new Promise((resolve) => {
      if (closing) return resolve(false);
      let timer: NodeJS.Timeout | undefined;
      const release = () => {
        if (timer) clearTimeout(timer);
        holds.delete(release);
        resolve(false);
      };
      holds.add(release);
      if (ms !== undefined) {
        timer = setTimeout(() => {
          holds.delete(release);
          resolve(true);
        }, ms);
      }
    });

  const authenticate = (request: FastifyRequest): ChannelState | null => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match) return null;
    const token = match[1]!;
    const longLived = longLivedTokens.get(token);
    if (longLived) return channels.get(longLived) ?? null;
    const issued = issuedTokens.get(token);
    if (!issued) return null;
    if (issued.expiresAt <= now()) {
      issuedTokens.delete(token);
      return null;
    }
    return channels.get(issued.channelId) ?? null;
  };

  const requestIdOf = (reply: FastifyReply) => String(reply.getHeader('x-line-request-id'));

  const app = Fastify({ forceCloseConnections: true, bodyLimit: 4 * 1024 * 1024 });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('x-line-request-id', randomUUID());
  });
  app.setNotFoundHandler(async (_request, reply) => reply.code(404).send({ message: 'Not found' }));
  app.setErrorHandler(async (error: { statusCode?: number; message: string }, request, reply) => {
    const status = error.statusCode && error.statusCode < 500 ? error.statusCode : 500;
    if (status === 500) logger?.error({ err: error, url: request.url }, 'line simulator: handler failed');
    return reply.code(status).send({ message: status === 500 ? 'Internal server error' : error.message });
  });

  /** One Messaging API call, from authentication to the answer. */
  const handle = async (endpoint: LineEndpoint, request: FastifyRequest, reply: FastifyReply) => {
    const requestId = requestIdOf(reply);
    const state = authenticate(request);
    if (!state) {
      unauthenticated += 1;
      return reply.code(401).send({
        message: 'Authentication failed. Confirm that the access token in the authorization header is valid.',
      });
    }
    const channelId = state.options.channelId;
    const retryKeyHeader = request.headers['x-line-retry-key'];
    const record: LineRequestRecord = {
      channelId,
      endpoint,
      requestId,
      retryKey: typeof retryKeyHeader === 'string' ? retryKeyHeader : null,
      status: 0,
      acceptedRequestId: null,
      recipients: 0,
      receivedAt: now(),
      respondedAt: null,
    };
    state.log(record);
    const answer = (status: number, body: unknown) => {
      record.status = status;
      record.respondedAt = now();
      if (status === 429) state.throttled += 1;
      return reply.code(status).send(body);
    };

    if (state.overRate(endpoint, now())) return answer(429, { message: RATE_LIMIT_MESSAGE });

    const operation = operations[endpoint];
    const parsed = parseBody(operation, request);
    const details = [
      ...parsed.details,
      ...(parsed.details.length > 0
        ? []
        : operation.check({ headers: flatHeaders(request), body: parsed.body })),
    ];
    if (details.length > 0) {
      recordViolation(channelId, endpoint, requestId, details);
      return answer(400, {
        message: `The request has ${details.length} error(s)`,
        details,
      });
    }

    const behaviour = state.takeBehaviour(endpoint, now());
    switch (behaviour?.kind) {
      case 'unauthorized':
        return answer(401, {
          message:
            'Authentication failed. Confirm that the access token in the authorization header is valid.',
        });
      case 'throttle':
        if (behaviour.retryAfterSeconds !== undefined)
          reply.header('retry-after', String(behaviour.retryAfterSeconds));
        return answer(429, { message: behaviour.message ?? RATE_LIMIT_MESSAGE });
      case 'quota-exhausted':
        return answer(429, { message: MONTHLY_LIMIT_MESSAGE });
      case 'server-error':
        return answer(behaviour.status ?? 500, { message: behaviour.message ?? 'Internal server error' });
      case 'reject':
        return answer(behaviour.status ?? 400, {
          message: behaviour.message ?? 'The request was rejected',
          ...(behaviour.details?.length ? { details: behaviour.details } : {}),
        });
      case 'stall':
        if (behaviour.beforeAccept && !(await hold(behaviour.ms))) {
          reply.hijack();
          reply.raw.destroy();
          return reply;
        }
        break;
      case undefined:
        break;
      default: {
        const unknown: never = behaviour;
        throw new Error(`unknown behaviour ${JSON.stringify(unknown)}`);
      }
    }

    if (endpoint === 'quota') {
      const quota = state.options.monthlyQuota;
      return answer(200, quota === undefined ? { type: 'none' } : { type: 'limited', value: quota });
    }
    if (endpoint === 'quota-consumption') return answer(200, { totalUsage: state.usage() });

    // A sending call. From here to the record nothing awaits, so two calls with one key cannot both pass.
    const body = parsed.body as { to?: string[]; recipient?: unknown; messages?: unknown[] };
    const key = record.retryKey;
    if (key !== null) {
      const first = state.acceptedKey(key, now());
      if (first !== null) {
        state.duplicates += 1;
        record.acceptedRequestId = first;
        reply.header('x-line-accepted-request-id', first);
        return answer(409, { message: 'The retry key is already accepted' });
      }
    }
    const to = endpoint === 'multicast' ? (body.to ?? []) : null;
    const audiences = endpoint === 'narrowcast' ? audienceIds(body.recipient) : [];
    const members =
      endpoint === 'broadcast'
        ? (state.options.friends ?? [])
        : endpoint === 'narrowcast' && audiences.length === 1
          ? (state.options.audiences?.[String(audiences[0])] ?? [])
          : (to ?? []);
    const quota = state.options.monthlyQuota;
    if (quota !== undefined && state.usage() + members.length > quota) {
      return answer(429, { message: MONTHLY_LIMIT_MESSAGE });
    }
    record.recipients = state.receive(members);
    state.recipientsDelivered += record.recipients;
    state.accepted += 1;
    if (endpoint === 'broadcast') state.broadcasts += 1;
    state.narrowcastAudiences.push(...audiences);
    if (key !== null) state.recordKey(key, requestId, now());

    if (hook) {
      try {
        await hook({
          channelId,
          endpoint,
          requestId,
          retryKey: key,
          recipients: record.recipients,
          to,
          audienceGroupIds: audiences,
          messages: body.messages ?? [],
        });
      } catch (error) {
        logger?.error({ err: error, requestId }, 'line simulator: beforeRespond hook failed');
        return answer(500, { message: 'Internal server error' });
      }
    }
    if (behaviour?.kind === 'stall' && !behaviour.beforeAccept && !(await hold(behaviour.ms))) {
      reply.hijack();
      reply.raw.destroy();
      return reply;
    }
    return answer(endpoint === 'narrowcast' ? 202 : 200, {});
  };

  for (const [endpoint, path] of Object.entries(SEND_PATHS)) {
    app.post(path, (request, reply) => handle(endpoint as LineEndpoint, request, reply));
  }
  for (const [endpoint, path] of Object.entries(GET_PATHS)) {
    app.get(path, (request, reply) => handle(endpoint as LineEndpoint, request, reply));
  }

  /** The channel-access-token API answers errors in its own shape: `{ error, error_description }`. */
  const tokenRequest = (operation: OperationContract, request: FastifyRequest, reply: FastifyReply) => {
    const parsed = parseBody(operation, request);
    const details = [
      ...parsed.details,
      ...(parsed.details.length > 0
        ? []
        : operation.check({ headers: flatHeaders(request), body: parsed.body })),
    ];
    if (details.length > 0) {
      recordViolation(null, operation.operationId, requestIdOf(reply), details);
      reply.code(400).send({
        error: 'invalid_request',
        error_description: details.map((d) => `${d.property}: ${d.message}`).join('; '),
      });
      return null;
    }
    return parsed.body as Record<string, string>;
  };

  app.post('/v2/oauth/accessToken', async (request, reply) => {
    const form = tokenRequest(operations.issue, request, reply);
    if (!form) return reply;
    if (form.grant_type !== 'client_credentials') {
      return reply
        .code(400)
        .send({ error: 'unsupported_grant_type', error_description: 'unsupported grant_type' });
    }
    const state = [...channels.values()].find(
      (candidate) =>
        (candidate.options.clientId ?? candidate.options.channelId) === form.client_id &&
        candidate.options.clientSecret !== undefined,
    );
    if (!state)
      return reply.code(400).send({ error: 'invalid_client', error_description: 'invalid client_id' });
    if (state.options.clientSecret !== form.client_secret) {
      return reply.code(400).send({ error: 'invalid_client', error_description: 'invalid client_secret' });
    }
    const accessToken = randomBytes(24).toString('base64url');
    issuedTokens.set(accessToken, {
      channelId: state.options.channelId,
      expiresAt: now() + tokenTtlSeconds * 1000,
    });
    return reply.send({ access_token: accessToken, expires_in: tokenTtlSeconds, token_type: 'Bearer' });
  });

  app.post('/v2/oauth/verify', async (request, reply) => {
    const form = tokenRequest(operations.verify, request, reply);
    if (!form) return reply;
    const token = form.access_token!;
    const issued = issuedTokens.get(token);
    const channelId = issued && issued.expiresAt > now() ? issued.channelId : longLivedTokens.get(token);
    const state = channelId === undefined ? undefined : channels.get(channelId);
    if (!state) {
      return reply.code(400).send({ error: 'invalid_request', error_description: 'access token expired' });
    }
    const expiresIn = issued ? Math.floor((issued.expiresAt - now()) / 1000) : 10 * 365 * 24 * 60 * 60;
    return reply.send({
      client_id: state.options.clientId ?? state.options.channelId,
      expires_in: expiresIn,
      scope: 'P CM',
    });
  });

  const summary = (state: ChannelState): LineChannelSummary => {
    let twice = 0;
    for (const count of state.receipts.values()) if (count > 1) twice += 1;
    return {
      channelId: state.options.channelId,
      requestCount: state.requests.length + state.requestsDropped,
      accepted: state.accepted,
      duplicates: state.duplicates,
      throttled: state.throttled,
      recipientsDelivered: state.recipientsDelivered,
      distinctRecipients: state.receipts.size,
      usersReceivedMoreThanOnce: twice,
      broadcasts: state.broadcasts,
      narrowcastAudiences: [...state.narrowcastAudiences],
      maxObservedRate: state.maxObservedRate(),
      violations: state.violations,
    };
  };

  function stats(): LineSimulatorStats;
  function stats(channelId: string): LineChannelStats;
  function stats(channelId?: string): LineSimulatorStats | LineChannelStats {
    if (channelId !== undefined) {
      const state = channel(channelId);
      return { ...summary(state), requests: [...state.requests], requestsDropped: state.requestsDropped };
    }
    return {
      channels: Object.fromEntries([...channels].map(([id, state]) => [id, summary(state)])),
      violationCount,
      violations: [...violations],
      unauthenticated,
    };
  }

  const usersReceivedMoreThanOnce = (channelId: string) =>
    [...channel(channelId).receipts].filter(([, count]) => count > 1).map(([userId]) => userId);

  const reset = () => {
    for (const state of channels.values()) state.reset();
    issuedTokens.clear();
    violations.length = 0;
    violationCount = 0;
    unauthenticated = 0;
  };

  // The control API: the same operations for a simulator running in another process.
  const control = (body: unknown): unknown => {
    if (!Buffer.isBuffer(body)) return null;
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      return null;
    }
  };
  app.post('/_simulator/channels', async (request, reply) => {
    const parsed = channelSchema.safeParse(control(request.body));
    if (!parsed.success)
      return reply.code(400).send({ message: 'invalid channel', details: parsed.error.issues });
    addChannel(parsed.data);
    return reply.code(204).send();
  });
  app.post<{ Params: { channelId: string } }>(
    '/_simulator/channels/:channelId/behaviours',
    async (request, reply) => {
      if (!channels.has(request.params.channelId))
        return reply.code(404).send({ message: 'unknown channel' });
      const parsed = behaviourSchema.safeParse(control(request.body));
      if (!parsed.success)
        return reply.code(400).send({ message: 'invalid behaviour', details: parsed.error.issues });
      channel(request.params.channelId).behave(parsed.data, now());
      return reply.code(204).send();
    },
  );
  app.delete<{ Params: { channelId: string } }>(
    '/_simulator/channels/:channelId/behaviours',
    async (request, reply) => {
      if (!channels.has(request.params.channelId))
        return reply.code(404).send({ message: 'unknown channel' });
      channel(request.params.channelId).clearBehaviours();
      return reply.code(204).send();
    },
  );
  app.get('/_simulator/stats', async () => stats());
  app.get<{ Params: { channelId: string } }>(
    '/_simulator/channels/:channelId/stats',
    async (request, reply) => {
      if (!channels.has(request.params.channelId))
        return reply.code(404).send({ message: 'unknown channel' });
      return stats(request.params.channelId);
    },
  );
  app.get<{ Params: { channelId: string; userId: string } }>(
    '/_simulator/channels/:channelId/users/:userId',
    async (request, reply) => {
      const state = channels.get(request.params.channelId);
      if (!state) return reply.code(404).send({ message: 'unknown channel' });
      return { userId: request.params.userId, timesReceived: state.receipts.get(request.params.userId) ?? 0 };
    },
  );
  app.post('/_simulator/reset', async (_request, reply) => {
    reset();
    return reply.code(204).send();
  });

  await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('line simulator: no TCP address');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger?.info({ url, channels: [...channels.keys()] }, 'line simulator listening');

  return {
    url,
    addChannel,
    behave: (channelId, behaviour) => channel(channelId).behave(behaviour, now()),
    clearBehaviours: (channelId) => channel(channelId).clearBehaviours(),
    beforeRespond(next) {
      hook = next;
    },
    stats,
    timesReceived: (channelId, userId) => channel(channelId).receipts.get(userId) ?? 0,
    usersReceivedMoreThanOnce,
    distinctRecipients: (channelId) => channel(channelId).receipts.size,
    get violationCount() {
      return violationCount;
    },
    violations: () => [...violations],
    reset,
    async close() {
      closing = true;
      for (const release of [...holds]) release();
      await app.close();
    },
  };
}
