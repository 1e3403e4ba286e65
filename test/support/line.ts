/**
 * Fixtures for LINE delivery tests: the LINE test server (the simulator that validates every request
 * against LINE's OpenAPI document) on a free loopback port, the settings that point Herald at it, and a
 * "LINE world" — a channel registered in both the simulator and Herald's directory (sealed credentials)
 * with sealed audiences of generated user ids.
 */
import { randomBytes } from 'node:crypto';
import { LineDirectory } from '../../src/aggregates/campaign/line/directory.js';
import { type LineSettings, lineSettings } from '../../src/aggregates/campaign/line/settings.js';
import type { LineRequestRecord } from '../../src/aggregates/campaign/line/simulator/channel-state.js';
import {
  type LineSimulator,
  type LineSimulatorOptions,
  startLineSimulator,
} from '../../src/aggregates/campaign/line/simulator/server.js';
import { type LineCampaignFacts, type LineMessage, lineRetryKey } from '../../src/domain/campaign/line.js';
import type { Database } from '../../src/ports/database.js';

/** A fixed credentials key for tests (never a production key). */
export const TEST_LINE_CREDENTIALS_KEY = Buffer.alloc(32, 7).toString('base64');

export const TEST_LINE_MESSAGES: LineMessage[] = [{ type: 'text', text: 'Hello from Herald' }];

/** The environment that points Herald's LINE adapter at `simulator`. */
export function lineEnv(simulator: Pick<LineSimulator, 'url'>, extra: Record<string, string> = {}) {
  return {
    HERALD_LINE_API_BASE_URL: simulator.url,
    HERALD_LINE_CREDENTIALS_KEY: TEST_LINE_CREDENTIALS_KEY,
    HERALD_LINE_REQUEST_TIMEOUT_MS: '5000',
    ...extra,
  };
}

/** LINE settings for `simulator` (a pool of `poolSize` for the concurrency check). */
export function testLineSettings(
  simulator: Pick<LineSimulator, 'url'>,
  extra: Record<string, string> = {},
  poolSize = 10,
): LineSettings {
  const env = lineEnv(simulator, extra);
  const parsed = Object.fromEntries(
    Object.entries(lineSettings.env).map(([name, schema]) => [
      name,
      schema.parse(env[name as keyof typeof env]),
    ]),
  );
  // biome-ignore lint/suspicious/noExplicitAny: the fragment's own validators produced `parsed`.
  return lineSettings.map(parsed as any, { dbPoolSize: poolSize } as never);
}

export function startTestLineSimulator(options: LineSimulatorOptions = {}): Promise<LineSimulator> {
  return startLineSimulator({ host: '127.0.0.1', port: 0, ...options });
}

/** The i-th test user id (LINE's shape: `U` and 32 hex digits); ids sort in i's order. */
export function lineUserId(i: number): string {
  return `U${i.toString(16).padStart(32, '0')}`;
}

export interface LineWorldOptions {
  organizationId?: string;
  lineOaId?: string;
  channelId?: string;
  /** Sealed audiences to create: id → member count (users 0..n−1, or `from`..). */
  audiences?: Record<string, number | { members: number; from?: number }>;
  /** Register the channel in the simulator only with a long-lived token (default) or client credentials. */
  tokenKind?: 'long_lived' | 'short_lived';
}

export interface LineWorld {
  organizationId: string;
  lineOaId: string;
  channelId: string;
  token: string;
  directory: LineDirectory;
}

/** A channel in the simulator and Herald's directory, and its sealed audiences. */
export async function lineWorld(
  db: Database,
  simulator: LineSimulator,
  settings: LineSettings,
  options: LineWorldOptions = {},
): Promise<LineWorld> {
  const organizationId = options.organizationId ?? 'org-1';
  const lineOaId = options.lineOaId ?? 'oa-1';
  const channelId = options.channelId ?? `channel-${lineOaId}`;
  const token = randomBytes(24).toString('base64url');
  const directory = new LineDirectory({ db, settings });
  if (options.tokenKind === 'short_lived') {
    const clientSecret = randomBytes(16).toString('hex');
    simulator.addChannel({ channelId, clientId: channelId, clientSecret });
    await directory.registerChannel({
      lineOaId,
      organizationId,
      channelId,
      clientId: channelId,
      clientSecret,
    });
  } else {
    simulator.addChannel({ channelId, tokens: [token] });
    await directory.registerChannel({ lineOaId, organizationId, channelId, channelAccessToken: token });
  }
  for (const [audienceId, spec] of Object.entries(options.audiences ?? {})) {
    const { members, from = 0 } = typeof spec === 'number' ? { members: spec } : spec;
    await addSealedAudience(directory, { audienceId, organizationId, members, from });
  }
  return { organizationId, lineOaId, channelId, token, directory };
}

/** A sealed audience of the organization: users `from`..`from + members − 1` (lineUserId). */
export async function addSealedAudience(
  directory: LineDirectory,
  spec: { audienceId: string; organizationId: string; members: number; from?: number },
): Promise<void> {
  const { audienceId, organizationId, members, from = 0 } = spec;
  await directory.createAudience({ audienceId, organizationId, name: audienceId });
  for (let start = 0; start < members; start += 10_000) {
    const ids = Array.from({ length: Math.min(10_000, members - start) }, (_, i) =>
      lineUserId(from + start + i),
    );
    await directory.addMembers(audienceId, ids);
  }
  await directory.sealAudience(audienceId);
}

/** The LINE content of a test campaign, to spread into a campaign fixture (`lineCampaign(TEST_LINE_CONTENT)`). */
export const TEST_LINE_CONTENT = { line: { messages: TEST_LINE_MESSAGES } };

/** A campaign as far as its LINE delivery plan goes (a campaign's state or its API view). */
export interface PlannedLineCampaign {
  campaignId: string;
  line: Pick<LineCampaignFacts, 'plan'> | null;
}

/** The X-Line-Retry-Key of each planned chunk, in chunk order (none while the delivery is unplanned). */
export function plannedLineKeys(campaign: PlannedLineCampaign): string[] {
  const plan = campaign.line?.plan;
  if (!plan) return [];
  return Array.from({ length: plan.chunks }, (_, chunk) =>
    lineRetryKey(campaign.campaignId, plan.epoch, chunk),
  );
}

/** LINE accepted the call (200; a narrowcast 202): its recipients were counted. */
export const lineAccepted = (request: Pick<LineRequestRecord, 'status'>) =>
  request.status === 200 || request.status === 202;

/**
 * How many calls LINE accepted under each of the campaign's planned retry keys, in chunk order, from the
 * simulator's request records (`simulator.stats(channelId).requests`): every entry 1 is "the campaign was
 * delivered exactly once"; 0 is a chunk never delivered, 2 a chunk delivered twice. Repeats LINE answered
 * 409 are not acceptances.
 */
export function lineAcceptancesPerChunk(
  requests: readonly LineRequestRecord[],
  campaign: PlannedLineCampaign,
): number[] {
  const accepted = new Map<string, number>();
  for (const request of requests) {
    if (request.retryKey !== null && lineAccepted(request)) {
      accepted.set(request.retryKey, (accepted.get(request.retryKey) ?? 0) + 1);
    }
  }
  return plannedLineKeys(campaign).map((key) => accepted.get(key) ?? 0);
}
