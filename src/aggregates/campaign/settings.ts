/**
 * The campaign slice's own settings (seed 000): the reaper's stale-claim window, the delivery
 * heartbeat, and the tick's Redis key prefix and side-stream retention. Composed into the
 * configuration by the campaign registration (`config.campaign`); the SMS channel's are `config.sms`.
 */
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import type { HeraldConfig } from '../../settings/core.js';
import { describeSetting as d, defineSettings, type SettingsOf } from '../../settings/fragment.js';
import { positiveInt } from '../../settings/validators.js';
import type { LineConfig } from './line/settings.js';
import type { billingSettings } from './sms/billing-settings.js';
import type { smsGatewaySettings } from './sms/gateway/settings.js';
import type { smsSettings } from './sms/settings.js';

export interface CampaignSettings {
  /** Seed 000: a DISPATCHING campaign without a heartbeat for this long is reclaimed (15 min). */
  readonly staleClaimMs: number;
  /** Seed 000: the delivery worker refreshes its claim this often during a send (5 min). */
  readonly heartbeatMs: number;
  /** Redis key prefix of the tick role's per-minute SET NX keys (seed 000: CAMPAIGN_SCHEDULE_TICK). */
  readonly tickKeyPrefix: string;
  /** Events of the per-minute `campaign_tick` side stream are deleted after this many days. */
  readonly tickRetentionDays: number;
  /** A LINE campaign's startAt may be at most this far ahead of the database clock. */
  readonly maxStartAheadMs: number;
}

export const campaignSettings = defineSettings({
  key: 'campaign',
  title: 'Campaigns',
  env: {
    HERALD_CAMPAIGN_STALE_CLAIM_SECONDS: d(
      positiveInt.default(900),
      'reaper: a DISPATCHING campaign without a heartbeat this long *whose message is no longer in flight* is reclaimed (seed 000: 15 min; ADR 0009)',
    ),
    HERALD_DELIVERY_HEARTBEAT_SECONDS: d(
      positiveInt.default(300),
      'the LINE delivery worker refreshes its claim this often during a send (seed 000: 5 min)',
    ),
    HERALD_TICK_KEY_PREFIX: d(
      z
        .string()
        .regex(/^\S+$/, 'must be non-empty and contain no whitespace')
        .default('CAMPAIGN_SCHEDULE_TICK'),
      'Redis key prefix of the per-minute tick (`herald tick`)',
    ),
    HERALD_TICK_RETENTION_DAYS: d(
      positiveInt.default(30),
      'events of the per-minute `campaign_tick` side stream are deleted after this (never while an outbox row refers to one)',
    ),
    HERALD_CAMPAIGN_MAX_START_AHEAD_DAYS: d(
      positiveInt.max(3_650).default(366),
      "a LINE campaign's `startAt` (create, schedule, reschedule) at most this far ahead of now, or 422 naming `startAt` (SMS campaigns: `HERALD_SMS_MAX_FUTURE_DAYS`)",
    ),
  },
  map(e, base): CampaignSettings {
    const stale = e.HERALD_CAMPAIGN_STALE_CLAIM_SECONDS;
    if (base.relay.lockSeconds >= stale) {
      throw new ConfigError(
        'HERALD_RELAY_LOCK_SECONDS',
        `(${base.relay.lockSeconds}) must be shorter than HERALD_CAMPAIGN_STALE_CLAIM_SECONDS (${stale}): ` +
          'rows held by a killed relay would wait past the stale-claim window',
      );
    }
    if (e.HERALD_DELIVERY_HEARTBEAT_SECONDS >= stale) {
      throw new ConfigError(
        'HERALD_DELIVERY_HEARTBEAT_SECONDS',
        `(${e.HERALD_DELIVERY_HEARTBEAT_SECONDS}) must be shorter than HERALD_CAMPAIGN_STALE_CLAIM_SECONDS (${stale}): ` +
          'a claim would go stale between two heartbeats of a live send',
      );
    }
    return {
      staleClaimMs: stale * 1000,
      heartbeatMs: e.HERALD_DELIVERY_HEARTBEAT_SECONDS * 1000,
      tickKeyPrefix: e.HERALD_TICK_KEY_PREFIX,
      tickRetentionDays: e.HERALD_TICK_RETENTION_DAYS,
      maxStartAheadMs: e.HERALD_CAMPAIGN_MAX_START_AHEAD_DAYS * 86_400_000,
    };
  },
});

/** The configuration the campaign slice runs with: the generic settings, its own and the SMS channel's. */
export type CampaignConfig = HeraldConfig &
  SettingsOf<typeof campaignSettings> &
  SettingsOf<typeof smsSettings> &
  SettingsOf<typeof smsGatewaySettings> &
  SettingsOf<typeof billingSettings> &
  LineConfig;
