/** Fixtures for SMS campaign tests: the service, ledger and sweepers wired to a test database, and requests. */

import type { BillingPort } from '../../src/aggregates/campaign/sms/billing.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { SmsCampaignService } from '../../src/aggregates/campaign/sms/service.js';
import type { SmsSettings } from '../../src/aggregates/campaign/sms/settings.js';
import { fingerprint } from '../../src/api/idempotency.js';
import type { InlineCampaignRequest } from '../../src/domain/sms/campaign-request.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import type { Database } from '../../src/ports/database.js';
import type { TestDatabase } from './services.js';

export const ORG = 'org-sms';

export function smsSettings(t: TestDatabase, overrides: Record<string, string> = {}): SmsSettings {
  return t.config(overrides).sms;
}

export function smsService(
  t: TestDatabase,
  options: { billing?: BillingPort; settings?: SmsSettings; db?: Database } = {},
): { service: SmsCampaignService; ledger: PostgresLedger; handler: CommandHandler } {
  const db = options.db ?? t.db;
  const ledger = new PostgresLedger(db);
  const handler = new CommandHandler({ db, pod: 'test' });
  const service = new SmsCampaignService({
    db,
    handler,
    billing: options.billing ?? ledger,
    settings: options.settings ?? smsSettings(t),
    idempotencyTtlMs: 24 * 3_600_000,
    logger: silentLogger,
  });
  return { service, ledger, handler };
}

/** Bangladesh numbers of the seeded operators (GP 017, Robi 018, Banglalink 019, Teletalk 015). */
export function msisdns(n: number, prefix = '017', offset = 0): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${String(10_000_000 + offset + i).slice(-8)}`);
}

/** A valid inline request: promotional, Bengali, personalized, instant. */
export function inlineRequest(overrides: Partial<InlineCampaignRequest> = {}): InlineCampaignRequest {
  return {
    name: 'Eid offer',
    messageType: 'PROMOTIONAL',
    lang: 'bn',
    campaignId: 'BTRC-2030-001',
    templateType: 'PERSONALIZED',
    template: 'প্রিয় {{name}}, আপনার ব্যালেন্স {{balance}} টাকা।',
    scheduleType: 'INSTANT',
    recipients: [
      { msisdn: '01712345678', tags: { name: 'Amina', balance: '250.00' } },
      { msisdn: '8801812345678', tags: { name: 'Rahim', balance: '125.50' } },
      { msisdn: '+8801912345678', tags: { name: 'নুসরাত', balance: '500.00' } },
    ],
    ...overrides,
  };
}

/** The idempotency options an API route would pass (its scope and fingerprint). */
export function idempotency(key: string, body: unknown, route = '/v1/campaigns') {
  return {
    key,
    scope: JSON.stringify([ORG, 'POST', route]),
    fingerprint: fingerprint({ body, params: {}, query: {} }),
  };
}

/** Rows of every table an SMS creation writes (to check "nothing written"). */
export async function writtenRows(db: Database) {
  const { rows } = await db.query<{
    campaigns: number;
    recipients: number;
    uploads: number;
    events: number;
    outbox: number;
    keys: number;
    charges: number;
  }>(`
    select (select count(*)::int from campaign) as campaigns,
           (select count(*)::int from campaign_recipient) as recipients,
           (select count(*)::int from campaign_upload) as uploads,
           (select count(*)::int from event) as events,
           (select count(*)::int from outbox) as outbox,
           (select count(*)::int from idempotency_key) as keys,
           (select count(*)::int from billing_entry where kind <> 'credit') as charges`);
  return rows[0]!;
}

/**
 * A daily window `start-end` (HH:MM:SS) placed relative to the database clock (offsets in seconds) in
 * the first of a few zones where it does not cross local midnight: tests inject time by moving the
 * window around the database's now(), never by sleeping through one.
 */
export async function windowAroundNow(
  db: Database,
  startOffsetS: number,
  endOffsetS: number,
): Promise<{ zone: string; window: string }> {
  for (const zone of ['Asia/Dhaka', 'Europe/London', 'America/New_York']) {
    const { rows } = await db.query<{ start: string; end: string }>(
      `select to_char((now() + make_interval(secs => $2)) at time zone $1, 'HH24:MI:SS') as start,
              to_char((now() + make_interval(secs => $3)) at time zone $1, 'HH24:MI:SS') as end`,
      [zone, startOffsetS, endOffsetS],
    );
    const { start, end } = rows[0]!;
    if (start < end) return { zone, window: `${start}-${end}` };
  }
  throw new Error('no zone without a midnight inside the window');
}

export { silentLogger };
