/**
 * The LINE directory (ADR 0021): each official account's channel with its sealed credentials, and the
 * organizations' multicast audiences. It hands the delivery a channel's access token (a long-lived one
 * opened from its sealed value; a short-lived one issued with the channel's client credentials, cached
 * sealed in the row and in memory, and re-issued shortly before it expires or after LINE refused it),
 * pages of a sealed audience in keyset order, and says whether a campaign is ready to be sent (its
 * channel registered to its organization with credentials that open, its audience sealed). Views never
 * hold a secret; secrets never reach a log, an event or an error.
 */
import { z } from 'zod';
import {
  type IssueChannelTokenOptions,
  type IssuedChannelToken,
  issueChannelToken,
} from '../../../adapters/line/channel-token.js';
import {
  addLineAudienceMembers,
  deleteLineChannel,
  forgetIssuedToken,
  insertLineAudience,
  type LineAudienceRow,
  type LineChannelRow,
  lineAudienceMembersPage,
  listLineAudiences,
  listLineChannels,
  resealLineChannel,
  sealLineAudience,
  selectLineAudience,
  selectLineChannel,
  storeIssuedToken,
  upsertLineChannel,
} from '../../../adapters/postgres/line-queries.js';
import type { ExistingCampaign } from '../../../domain/campaign.js';
import {
  ConflictError,
  IllegalStateError,
  NotFoundError,
  PermanentError,
  ValidationError,
} from '../../../errors.js';
import type { Logger } from '../../../logger.js';
import type { Database } from '../../../ports/database.js';
import { openSecret, sealedKeyId, sealSecret } from './credentials.js';
import type { LineDeliveryDirectory } from './delivery.js';
import type { LineSettings } from './settings.js';

/** At most this many user ids per upload call (`POST /v1/line/audiences/:id/members`). */
export const LINE_AUDIENCE_UPLOAD_MAX = 10_000;

const lineUserIdSchema = z.string().regex(/^U[0-9a-f]{32}$/, 'must be a LINE user id (U and 32 hex digits)');
const idSchema = z.string().regex(/^[A-Za-z0-9@._-]{1,100}$/, 'must be 1..100 of [A-Za-z0-9@._-]');

export const newLineChannelSchema = z.union([
  z.strictObject({
    lineOaId: idSchema,
    channelId: idSchema,
    channelAccessToken: z.string().min(1).max(1000).describe('a long-lived channel access token'),
  }),
  z.strictObject({
    lineOaId: idSchema,
    channelId: idSchema,
    clientId: idSchema.describe('the channel id that issues short-lived tokens'),
    clientSecret: z.string().min(1).max(200).describe('the channel secret'),
  }),
]);
export type NewLineChannel = z.output<typeof newLineChannelSchema> & { organizationId: string };

export const newLineAudienceSchema = z.strictObject({
  audienceId: idSchema,
  name: z.string().trim().min(1).max(200),
});

export const lineAudienceMembersSchema = z.strictObject({
  userIds: z.array(lineUserIdSchema).min(1).max(LINE_AUDIENCE_UPLOAD_MAX),
});

/** A channel as the API, the CLI and the dashboard show it: no token, no secret. */
export const lineChannelView = z
  .object({
    lineOaId: z.string(),
    organizationId: z.string(),
    channelId: z.string(),
    tokenKind: z.enum(['long_lived', 'short_lived']),
    clientId: z.string().nullable(),
    issuedTokenExpiresAt: z.iso.datetime().nullable(),
    keyId: z.string().describe('the id of the key its credentials are sealed with'),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'LineChannel' });
export type LineChannelView = z.output<typeof lineChannelView>;

export const lineAudienceView = z
  .object({
    audienceId: z.string(),
    organizationId: z.string(),
    name: z.string(),
    members: z.number().int(),
    sealed: z.boolean(),
    sealedAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'LineAudience' });
export type LineAudienceView = z.output<typeof lineAudienceView>;

function channelView(row: LineChannelRow): LineChannelView {
  return {
    lineOaId: row.lineOaId,
    organizationId: row.organizationId,
    channelId: row.channelId,
    tokenKind: row.tokenKind,
    clientId: row.clientId,
    issuedTokenExpiresAt: row.issuedExpiresAt?.toISOString() ?? null,
    keyId: sealedKeyId(row.sealedToken ?? row.sealedClientSecret ?? ''),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

function audienceView(row: LineAudienceRow): LineAudienceView {
  return {
    audienceId: row.audienceId,
    organizationId: row.organizationId,
    name: row.name,
    members: row.members,
    sealed: row.sealedAt !== null,
    sealedAt: row.sealedAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
  };
}

export interface LineDirectoryDeps {
  db: Database;
  settings: Pick<LineSettings, 'apiBaseUrl' | 'requestTimeoutMs' | 'tokenRefreshMarginMs' | 'keyRing'>;
  logger?: Logger;
  /** The clock token expiry is judged on (tests inject one). */
  now?: () => number;
  /** Issues a short-lived token (default: LINE's channel access token API). */
  issueToken?: (options: IssueChannelTokenOptions) => Promise<IssuedChannelToken>;
}

interface CachedToken {
  token: string;
  /** Null for a long-lived token. */
  expiresAt: number | null;
}

export class LineDirectory implements LineDeliveryDirectory {
  private readonly tokens = new Map<string, CachedToken>();
  private readonly issuing = new Map<string, Promise<string>>();
  /** Tokens LINE refused (401), per official account: never handed out again by this process. */
  private readonly refused = new Map<string, string>();
  private readonly now: () => number;
  private readonly issueToken: NonNullable<LineDirectoryDeps['issueToken']>;

  constructor(private readonly deps: LineDirectoryDeps) {
    this.now = deps.now ?? Date.now;
    this.issueToken = deps.issueToken ?? issueChannelToken;
  }

  private get ring() {
    return this.deps.settings.keyRing;
  }

  // --- channels --------------------------------------------------------------------------------------

  /** Registers a channel, or replaces the organization's own channel's credentials. */
  async registerChannel(input: NewLineChannel): Promise<LineChannelView> {
    const { lineOaId } = input;
    const longLived = 'channelAccessToken' in input;
    const row = await upsertLineChannel(this.deps.db, {
      lineOaId,
      organizationId: input.organizationId,
      channelId: input.channelId,
      tokenKind: longLived ? 'long_lived' : 'short_lived',
      sealedToken: longLived ? sealSecret(this.ring, lineOaId, input.channelAccessToken) : null,
      clientId: longLived ? null : input.clientId,
      sealedClientSecret: longLived ? null : sealSecret(this.ring, lineOaId, input.clientSecret),
    });
    if (!row) {
      throw new ConflictError(`official account ${lineOaId} is registered by another organization`, {
        field: 'lineOaId',
      });
    }
    this.forget(lineOaId);
    this.deps.logger?.info(
      { lineOaId, channelId: row.channelId, tokenKind: row.tokenKind },
      'LINE channel registered',
    );
    return channelView(row);
  }

  /** The organization's channel (another organization's is reported as missing). */
  async getChannel(lineOaId: string, organizationId: string | null): Promise<LineChannelView> {
    return channelView(await this.ownChannel(lineOaId, organizationId));
  }

  async listChannels(organizationId: string | null): Promise<LineChannelView[]> {
    return (await listLineChannels(this.deps.db, organizationId)).map(channelView);
  }

  async removeChannel(lineOaId: string, organizationId: string | null): Promise<LineChannelView> {
    const row = await deleteLineChannel(this.deps.db, lineOaId, organizationId);
    if (!row) throw new NotFoundError(`LINE channel ${lineOaId} not found`);
    this.forget(lineOaId);
    return channelView(row);
  }

  /**
   * Re-seals every channel's credentials with the current key (after a new HERALD_LINE_CREDENTIALS_KEY,
   * the old one moved to _OLD_KEYS); a row changed meanwhile is read again. Once it reports no row left
   * on an old key, that key can be dropped.
   */
  async rotateKeys(): Promise<{ resealed: number; current: number }> {
    const current = this.ring.current.id;
    let resealed = 0;
    let upToDate = 0;
    for (const listed of await listLineChannels(this.deps.db, null)) {
      for (let attempt = 0; ; attempt += 1) {
        const row = attempt === 0 ? listed : await selectLineChannel(this.deps.db, listed.lineOaId);
        if (!row) break;
        const sealed = [row.sealedToken, row.sealedClientSecret, row.sealedIssuedToken];
        if (sealed.every((value) => value === null || sealedKeyId(value) === current)) {
          upToDate += 1;
          break;
        }
        const reseal = (value: string | null) =>
          value === null
            ? null
            : sealSecret(this.ring, row.lineOaId, openSecret(this.ring, row.lineOaId, value));
        const done = await resealLineChannel(
          this.deps.db,
          row.lineOaId,
          {
            sealedToken: reseal(row.sealedToken),
            sealedClientSecret: reseal(row.sealedClientSecret),
            sealedIssuedToken: reseal(row.sealedIssuedToken),
          },
          row,
        );
        if (done) {
          resealed += 1;
          break;
        }
        if (attempt >= 5)
          throw new ConflictError(`LINE channel ${row.lineOaId} keeps changing; run the rotation again`);
      }
    }
    this.deps.logger?.info({ keyId: current, resealed, upToDate }, 'LINE credentials re-sealed');
    return { resealed, current: upToDate };
  }

  // --- tokens (the delivery's port) ------------------------------------------------------------------

  async tokenFor(lineOaId: string): Promise<string> {
    const cached = this.tokens.get(lineOaId);
    if (
      cached &&
      (cached.expiresAt === null || cached.expiresAt - this.deps.settings.tokenRefreshMarginMs > this.now())
    ) {
      return cached.token;
    }
    const pending = this.issuing.get(lineOaId);
    if (pending) return pending;
    const loading = this.loadToken(lineOaId).finally(() => this.issuing.delete(lineOaId));
    this.issuing.set(lineOaId, loading);
    return loading;
  }

  /** LINE refused the token (401): the next `tokenFor` opens or issues a fresh one. */
  invalidateToken(lineOaId: string): void {
    const cached = this.tokens.get(lineOaId);
    if (cached) this.refused.set(lineOaId, cached.token);
    this.tokens.delete(lineOaId);
  }

  private async loadToken(lineOaId: string): Promise<string> {
    const row = await selectLineChannel(this.deps.db, lineOaId);
    if (!row) throw new PermanentError(`no LINE channel is registered for official account ${lineOaId}`);
    if (row.tokenKind === 'long_lived') {
      const token = openSecret(this.ring, lineOaId, row.sealedToken!);
      this.tokens.set(lineOaId, { token, expiresAt: null });
      return token;
    }
    const margin = this.deps.settings.tokenRefreshMarginMs;
    if (row.sealedIssuedToken && row.issuedExpiresAt && row.issuedExpiresAt.getTime() - margin > this.now()) {
      const token = openSecret(this.ring, lineOaId, row.sealedIssuedToken);
      if (token !== this.refused.get(lineOaId)) {
        this.tokens.set(lineOaId, { token, expiresAt: row.issuedExpiresAt.getTime() });
        return token;
      }
      await forgetIssuedToken(this.deps.db, lineOaId, row.sealedIssuedToken);
    }
    const issued = await this.issueToken({
      baseUrl: this.deps.settings.apiBaseUrl,
      clientId: row.clientId!,
      clientSecret: openSecret(this.ring, lineOaId, row.sealedClientSecret!),
      timeoutMs: this.deps.settings.requestTimeoutMs,
      now: this.now,
    });
    await storeIssuedToken(
      this.deps.db,
      lineOaId,
      sealSecret(this.ring, lineOaId, issued.accessToken),
      issued.expiresAt,
    );
    this.tokens.set(lineOaId, { token: issued.accessToken, expiresAt: issued.expiresAt.getTime() });
    this.refused.delete(lineOaId);
    this.deps.logger?.info(
      { lineOaId, expiresAt: issued.expiresAt.toISOString() },
      'LINE short-lived channel token issued',
    );
    return issued.accessToken;
  }

  private forget(lineOaId: string): void {
    this.tokens.delete(lineOaId);
    this.refused.delete(lineOaId);
  }

  private async ownChannel(lineOaId: string, organizationId: string | null): Promise<LineChannelRow> {
    const row = await selectLineChannel(this.deps.db, lineOaId);
    if (!row || (organizationId !== null && row.organizationId !== organizationId)) {
      throw new NotFoundError(`LINE channel ${lineOaId} not found`);
    }
    return row;
  }

  // --- audiences -------------------------------------------------------------------------------------

  async createAudience(input: z.output<typeof newLineAudienceSchema> & { organizationId: string }) {
    const row = await insertLineAudience(this.deps.db, input);
    if (!row) throw new ConflictError(`audience ${input.audienceId} already exists`, { field: 'audienceId' });
    return audienceView(row);
  }

  /** Adds up to 10,000 user ids (repeats ignored) to an unsealed audience of the organization. */
  async addMembers(
    audienceId: string,
    userIds: readonly string[],
    organizationId: string | null = null,
  ): Promise<LineAudienceView> {
    const parsed = lineAudienceMembersSchema.safeParse({ userIds });
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ValidationError(`userIds: ${issue.message}`, {
        field: ['userIds', ...issue.path.slice(1)].join('.'),
      });
    }
    return this.deps.db.transaction(async (tx) => {
      const row = await selectLineAudience(tx, audienceId, { lock: true });
      if (!row || (organizationId !== null && row.organizationId !== organizationId)) {
        throw new NotFoundError(`audience ${audienceId} not found`);
      }
      if (row.sealedAt) {
        throw new IllegalStateError(`audience ${audienceId} is sealed: it no longer takes members`, {
          currentStatus: 'SEALED',
        });
      }
      const members = await addLineAudienceMembers(tx, audienceId, parsed.data.userIds);
      return audienceView({ ...row, members: members ?? row.members });
    });
  }

  async sealAudience(audienceId: string, organizationId: string | null = null): Promise<LineAudienceView> {
    const row = await selectLineAudience(this.deps.db, audienceId);
    if (!row || (organizationId !== null && row.organizationId !== organizationId)) {
      throw new NotFoundError(`audience ${audienceId} not found`);
    }
    const sealed = await sealLineAudience(this.deps.db, audienceId, row.organizationId);
    if (sealed) return audienceView(sealed);
    if (row.sealedAt) return audienceView(row);
    throw new IllegalStateError(`audience ${audienceId} has no members: nothing to seal`, {
      currentStatus: 'EMPTY',
    });
  }

  async getAudience(audienceId: string, organizationId: string | null): Promise<LineAudienceView> {
    const row = await selectLineAudience(this.deps.db, audienceId);
    if (!row || (organizationId !== null && row.organizationId !== organizationId)) {
      throw new NotFoundError(`audience ${audienceId} not found`);
    }
    return audienceView(row);
  }

  async listAudiences(organizationId: string, after: string | null = null, limit = 100) {
    return (await listLineAudiences(this.deps.db, organizationId, after, limit)).map(audienceView);
  }

  membersPage(audienceId: string, after: string | null, limit: number): Promise<string[]> {
    return lineAudienceMembersPage(this.deps.db, audienceId, after, limit);
  }

  async sealedAudienceSize(
    audienceId: string,
    organizationId: string,
  ): Promise<number | { refused: string }> {
    const row = await selectLineAudience(this.deps.db, audienceId);
    if (!row || row.organizationId !== organizationId)
      return { refused: `audience ${audienceId} does not exist` };
    if (!row.sealedAt) return { refused: `audience ${audienceId} is not sealed` };
    return row.members;
  }

  // --- readiness -------------------------------------------------------------------------------------

  /** Why the campaign cannot be sent yet (its channel, its audience), or null. */
  async readiness(
    campaign: Pick<ExistingCampaign, 'organizationId' | 'channel' | 'castType' | 'audienceId' | 'lineOaId'>,
  ): Promise<{ field: string; reason: string } | null> {
    if (campaign.channel !== 'line') return null;
    if (!campaign.lineOaId) return { field: 'lineOaId', reason: 'a LINE campaign needs an official account' };
    const row = await selectLineChannel(this.deps.db, campaign.lineOaId);
    if (!row || row.organizationId !== campaign.organizationId) {
      return {
        field: 'lineOaId',
        reason: `no LINE channel is registered for official account ${campaign.lineOaId} (POST /v1/line/channels)`,
      };
    }
    try {
      openSecret(this.ring, row.lineOaId, row.sealedToken ?? row.sealedClientSecret!);
    } catch (error) {
      return { field: 'lineOaId', reason: (error as Error).message };
    }
    if (campaign.castType === 'multicast') {
      if (!campaign.audienceId) return { field: 'audienceId', reason: 'a multicast needs an audience' };
      const size = await this.sealedAudienceSize(campaign.audienceId, campaign.organizationId);
      if (typeof size !== 'number') {
        return { field: 'audienceId', reason: `${size.refused} (POST /v1/line/audiences, then …/seal)` };
      }
    }
    return null;
  }
}
