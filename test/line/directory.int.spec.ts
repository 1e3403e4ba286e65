/**
 * The LINE directory on PostgreSQL (ADR 0021): channel credentials are sealed at rest and never in a
 * view, one organization cannot take or see another's channel, short-lived tokens are issued from the
 * LINE test server once, shared through the row by a second pod, re-issued before expiry and after a
 * 401, a key rotation re-seals every row, and audiences take members until sealed and are then read in
 * keyset pages that cover every member once.
 */
import { createSecretKey, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { issueChannelToken } from '../../src/adapters/line/channel-token.js';
import { LineDirectory } from '../../src/aggregates/campaign/line/directory.js';
import type { LineSettings } from '../../src/aggregates/campaign/line/settings.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { ConflictError, IllegalStateError, NotFoundError, ValidationError } from '../../src/errors.js';
import { lineUserId, startTestLineSimulator, testLineSettings } from '../support/line.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let sim: LineSimulator;
let settings: LineSettings;

beforeAll(async () => {
  t = await createTestDatabase();
  sim = await startTestLineSimulator({ issuedTokenTtlSeconds: 3600 });
  settings = testLineSettings(sim, { HERALD_LINE_TOKEN_REFRESH_MARGIN_SECONDS: '600' });
});
afterAll(async () => {
  await sim?.close();
  await t?.drop();
});
beforeEach(async () => {
  await t.db.query('truncate line_channel, line_audience cascade');
});

/** Counts the real token issues (each an HTTP call to the test server). */
function countingIssuer() {
  const issued: string[] = [];
  const issueToken: typeof issueChannelToken = async (options) => {
    const token = await issueChannelToken(options);
    issued.push(token.accessToken);
    return token;
  };
  return { issued, issueToken };
}

async function rowText(lineOaId: string): Promise<string> {
  const { rows } = await t.db.query('select * from line_channel where line_oa_id = $1', [lineOaId]);
  return JSON.stringify(rows);
}

describe('LINE channels', () => {
  it('seals a long-lived token at rest, never shows it, and hands it to the delivery', async () => {
    const directory = new LineDirectory({ db: t.db, settings });
    const token = randomBytes(24).toString('base64url');
    const view = await directory.registerChannel({
      lineOaId: 'oa-1',
      organizationId: 'org-1',
      channelId: 'ch-1',
      channelAccessToken: token,
    });
    expect(view).toMatchObject({ lineOaId: 'oa-1', channelId: 'ch-1', tokenKind: 'long_lived', keyId: 'k1' });
    expect(JSON.stringify(view)).not.toContain(token);
    expect(JSON.stringify(await directory.listChannels('org-1'))).not.toContain(token);
    expect(await rowText('oa-1')).not.toContain(token);
    expect(await directory.tokenFor('oa-1')).toBe(token);
    // A fresh process (another pod) opens the same row.
    expect(await new LineDirectory({ db: t.db, settings }).tokenFor('oa-1')).toBe(token);
  });

  it("refuses another organization's official account and hides it from that organization", async () => {
    const directory = new LineDirectory({ db: t.db, settings });
    await directory.registerChannel({
      lineOaId: 'oa-1',
      organizationId: 'org-1',
      channelId: 'ch-1',
      channelAccessToken: 'a',
    });
    await expect(
      directory.registerChannel({
        lineOaId: 'oa-1',
        organizationId: 'org-2',
        channelId: 'ch-x',
        channelAccessToken: 'b',
      }),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await directory.tokenFor('oa-1')).toBe('a');
    await expect(directory.getChannel('oa-1', 'org-2')).rejects.toBeInstanceOf(NotFoundError);
    await expect(directory.removeChannel('oa-1', 'org-2')).rejects.toBeInstanceOf(NotFoundError);
    expect(await directory.listChannels('org-2')).toEqual([]);
    // The owner replaces its credentials; the cached token goes with them.
    await directory.registerChannel({
      lineOaId: 'oa-1',
      organizationId: 'org-1',
      channelId: 'ch-1',
      channelAccessToken: 'c',
    });
    expect(await directory.tokenFor('oa-1')).toBe('c');
    await directory.removeChannel('oa-1', 'org-1');
    await expect(directory.tokenFor('oa-1')).rejects.toThrow(
      /no LINE channel is registered for official account oa-1/,
    );
  });

  it('issues a short-lived token once, shares it through the row, and re-issues it before expiry and after a 401', async () => {
    const secret = randomBytes(16).toString('hex');
    sim.addChannel({ channelId: 'ch-short', clientId: 'ch-short', clientSecret: secret });
    let now = Date.now();
    const first = countingIssuer();
    const directory = new LineDirectory({ db: t.db, settings, now: () => now, issueToken: first.issueToken });
    await directory.registerChannel({
      lineOaId: 'oa-s',
      organizationId: 'org-1',
      channelId: 'ch-short',
      clientId: 'ch-short',
      clientSecret: secret,
    });
    const [a, b] = await Promise.all([directory.tokenFor('oa-s'), directory.tokenFor('oa-s')]);
    expect(a).toBe(b);
    expect(first.issued).toEqual([a]);
    expect(await rowText('oa-s')).not.toContain(a);
    expect(await rowText('oa-s')).not.toContain(secret);
    expect((await sim.stats()).unauthenticated).toBe(0);

    // Another pod finds the issued token in the row: no second issue.
    const second = countingIssuer();
    const pod2 = new LineDirectory({ db: t.db, settings, now: () => now, issueToken: second.issueToken });
    expect(await pod2.tokenFor('oa-s')).toBe(a);
    expect(second.issued).toEqual([]);
    expect((await pod2.getChannel('oa-s', 'org-1')).issuedTokenExpiresAt).not.toBeNull();

    // Within the refresh margin (10 min before the hour's expiry), a new one is issued.
    now += 3_100_000;
    const c = await directory.tokenFor('oa-s');
    expect(c).not.toBe(a);
    expect(first.issued).toEqual([a, c]);

    // LINE refused it (401): the next call issues again, also on a pod that reads the row.
    directory.invalidateToken('oa-s');
    const d = await directory.tokenFor('oa-s');
    expect(first.issued).toEqual([a, c, d]);
    expect(await pod2.tokenFor('oa-s')).toBe(d);
  });

  it('a key rotation re-seals every row with the new key; the old key can then go', async () => {
    const oldRaw = randomBytes(32);
    const oldRing = {
      current: { id: 'old', key: createSecretKey(oldRaw) },
      keys: new Map([['old', createSecretKey(oldRaw)]]),
      development: false,
    };
    const before = new LineDirectory({ db: t.db, settings: { ...settings, keyRing: oldRing } });
    await before.registerChannel({
      lineOaId: 'oa-1',
      organizationId: 'org-1',
      channelId: 'ch-1',
      channelAccessToken: 'tok-1',
    });
    await before.registerChannel({
      lineOaId: 'oa-2',
      organizationId: 'org-1',
      channelId: 'ch-2',
      clientId: 'ch-2',
      clientSecret: 'sec-2',
    });

    const newRaw = randomBytes(32);
    const rotated = {
      current: { id: 'new', key: createSecretKey(newRaw) },
      keys: new Map([
        ['new', createSecretKey(newRaw)],
        ['old', createSecretKey(oldRaw)],
      ]),
      development: false,
    };
    const during = new LineDirectory({ db: t.db, settings: { ...settings, keyRing: rotated } });
    expect(await during.tokenFor('oa-1')).toBe('tok-1');
    expect(await during.rotateKeys()).toEqual({ resealed: 2, current: 0 });
    expect(await during.rotateKeys()).toEqual({ resealed: 0, current: 2 });
    expect((await during.listChannels('org-1')).map((c) => c.keyId)).toEqual(['new', 'new']);

    const newOnly = {
      current: rotated.current,
      keys: new Map([['new', createSecretKey(newRaw)]]),
      development: false,
    };
    const after = new LineDirectory({ db: t.db, settings: { ...settings, keyRing: newOnly } });
    expect(await after.tokenFor('oa-1')).toBe('tok-1');
    // And a row still on a key that is gone is named as such by the readiness check.
    const stale = new LineDirectory({ db: t.db, settings: { ...settings, keyRing: oldRing } });
    await stale.registerChannel({
      lineOaId: 'oa-3',
      organizationId: 'org-1',
      channelId: 'ch-3',
      channelAccessToken: 'tok-3',
    });
    expect(
      await after.readiness({
        organizationId: 'org-1',
        channel: 'line',
        castType: 'broadcast',
        audienceId: null,
        lineOaId: 'oa-3',
      }),
    ).toEqual({
      field: 'lineOaId',
      reason: expect.stringMatching(/sealed with key 'old', which is not configured/),
    });
  });
});

describe('LINE audiences', () => {
  it('take members in pages (repeats ignored) until sealed; pages in keyset order cover each member once', async () => {
    const directory = new LineDirectory({ db: t.db, settings });
    await directory.createAudience({ audienceId: 'aud-1', organizationId: 'org-1', name: 'one' });
    await expect(
      directory.createAudience({ audienceId: 'aud-1', organizationId: 'org-1', name: 'again' }),
    ).rejects.toBeInstanceOf(ConflictError);
    await expect(directory.sealAudience('aud-1', 'org-1')).rejects.toBeInstanceOf(IllegalStateError);
    const ids = Array.from({ length: 1234 }, (_, i) => lineUserId(i * 7919));
    const shuffled = [...ids].sort(() => Math.random() - 0.5);
    await directory.addMembers('aud-1', shuffled.slice(0, 700), 'org-1');
    const view = await directory.addMembers('aud-1', shuffled.slice(600), 'org-1');
    expect(view.members).toBe(1234);
    expect(await directory.sealedAudienceSize('aud-1', 'org-1')).toEqual({
      refused: 'audience aud-1 is not sealed',
    });

    const sealed = await directory.sealAudience('aud-1', 'org-1');
    expect(sealed).toMatchObject({ members: 1234, sealed: true });
    expect(await directory.sealAudience('aud-1', 'org-1')).toEqual(sealed);
    await expect(directory.addMembers('aud-1', [lineUserId(999_999)], 'org-1')).rejects.toBeInstanceOf(
      IllegalStateError,
    );
    expect(await directory.sealedAudienceSize('aud-1', 'org-1')).toBe(1234);
    expect(await directory.sealedAudienceSize('aud-1', 'org-2')).toEqual({
      refused: 'audience aud-1 does not exist',
    });

    const read: string[] = [];
    for (let after: string | null = null; ; ) {
      const page = await directory.membersPage('aud-1', after, 500);
      if (page.length === 0) break;
      read.push(...page);
      after = page.at(-1)!;
    }
    expect(read).toEqual([...ids].sort());
  });

  it('refuses malformed user ids naming the item, and uploads over 10,000, writing nothing', async () => {
    const directory = new LineDirectory({ db: t.db, settings });
    await directory.createAudience({ audienceId: 'aud-2', organizationId: 'org-1', name: 'two' });
    const error = await directory.addMembers('aud-2', [lineUserId(1), 'U123'], 'org-1').catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.details.field).toBe('userIds.1');
    await expect(
      directory.addMembers(
        'aud-2',
        Array.from({ length: 10_001 }, (_, i) => lineUserId(i)),
        'org-1',
      ),
    ).rejects.toBeInstanceOf(ValidationError);
    await expect(directory.addMembers('aud-2', [lineUserId(1)], 'org-2')).rejects.toBeInstanceOf(
      NotFoundError,
    );
    expect((await directory.getAudience('aud-2', 'org-1')).members).toBe(0);
  });
});

describe('readiness of a LINE campaign', () => {
  it('names the missing channel, the unsealed or foreign audience, and is null once all is in place', async () => {
    const directory = new LineDirectory({ db: t.db, settings });
    const campaign = {
      organizationId: 'org-1',
      channel: 'line' as const,
      castType: 'multicast' as const,
      audienceId: 'aud-r',
      lineOaId: 'oa-r',
    };
    expect(await directory.readiness({ ...campaign, channel: 'sms' })).toBeNull();
    expect(await directory.readiness(campaign)).toEqual({
      field: 'lineOaId',
      reason: expect.stringMatching(/no LINE channel is registered for official account oa-r/),
    });
    await directory.registerChannel({
      lineOaId: 'oa-r',
      organizationId: 'org-2',
      channelId: 'ch-r',
      channelAccessToken: 't',
    });
    expect((await directory.readiness(campaign))?.field).toBe('lineOaId');
    await directory.removeChannel('oa-r', 'org-2');
    await directory.registerChannel({
      lineOaId: 'oa-r',
      organizationId: 'org-1',
      channelId: 'ch-r',
      channelAccessToken: 't',
    });
    expect(await directory.readiness(campaign)).toEqual({
      field: 'audienceId',
      reason: expect.stringMatching(/audience aud-r does not exist/),
    });
    await directory.createAudience({ audienceId: 'aud-r', organizationId: 'org-1', name: 'r' });
    await directory.addMembers('aud-r', [lineUserId(1)], 'org-1');
    expect(await directory.readiness(campaign)).toEqual({
      field: 'audienceId',
      reason: expect.stringMatching(/is not sealed/),
    });
    await directory.sealAudience('aud-r', 'org-1');
    expect(await directory.readiness(campaign)).toBeNull();
    expect(await directory.readiness({ ...campaign, castType: 'broadcast', audienceId: null })).toBeNull();
  });
});
