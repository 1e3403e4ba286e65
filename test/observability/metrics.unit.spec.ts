/**
 * The metrics registry on its own: every series Herald documents is registered with a help text and a
 * unit in its name, the meters the relay, sweepers and consumers hold move their series, and only
 * src/observability/ imports prom-client.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { HeraldMetrics } from '../../src/observability/metrics.js';
import { samples } from '../support/metrics.js';

const SERIES = {
  herald_relay_published_total: 'counter',
  herald_relay_failed_total: 'counter',
  herald_relay_dead_total: 'counter',
  herald_relay_batch_duration_seconds: 'histogram',
  herald_relay_confirm_duration_seconds: 'histogram',
  herald_relay_claim_age_seconds: 'gauge',
  herald_sweeper_claims_total: 'counter',
  herald_sweeper_batch_duration_seconds: 'histogram',
  herald_sweeper_due_to_claimed_seconds: 'histogram',
  herald_consumer_messages_total: 'counter',
  herald_outbox_pending: 'gauge',
  herald_outbox_oldest_pending_age_seconds: 'gauge',
  herald_outbox_dead: 'gauge',
  herald_outbox_parked_keys: 'gauge',
  herald_lease_age_seconds: 'gauge',
  herald_lease_held: 'gauge',
  herald_projector_lag_seconds: 'gauge',
  herald_metrics_database_up: 'gauge',
  herald_sms_gateway_submits_total: 'counter',
  herald_sms_gateway_receipts_total: 'counter',
  herald_sms_gateway_binds: 'gauge',
} as const;

describe('HeraldMetrics', () => {
  it('registers every documented series with its type and a help text', async () => {
    const metrics = new HeraldMetrics();
    const { contentType, body } = await metrics.exposition();
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const [name, type] of Object.entries(SERIES)) {
      expect(body).toContain(`# TYPE ${name} ${type}\n`);
      expect(body).toMatch(new RegExp(`# HELP ${name} \\S.{10,}\\n`));
    }
    // Only Herald's series: the Node.js process series come with the first endpoint.
    expect([...body.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]).sort()).toEqual(Object.keys(SERIES).sort());
    metrics.enableProcessMetrics();
    metrics.enableProcessMetrics(); // once
    expect((await metrics.exposition()).body).toContain('# TYPE process_cpu_user_seconds_total counter');
  });

  it('meters start their label sets at zero and count what they are told', async () => {
    const metrics = new HeraldMetrics();
    const amqp = metrics.relaySink('amqp');
    const sweep = metrics.sweeper('campaign', 'campaign.claim');
    const consumer = metrics.consumer('line_q', 'line-delivery');
    let values = samples((await metrics.exposition()).body);
    expect(values.get('herald_relay_published_total{sink="amqp"}')).toBe(0);
    expect(
      values.get('herald_consumer_messages_total{queue="line_q",consumer="line-delivery",outcome="dead"}'),
    ).toBe(0);
    expect(
      values.get(
        'herald_sweeper_due_to_claimed_seconds_count{aggregate="campaign",sweeper="campaign.claim"}',
      ),
    ).toBe(0);

    amqp.published(3);
    amqp.published(0);
    amqp.failed(2);
    amqp.dead(1);
    amqp.confirmed(0.004);
    metrics.relayBatchDone(0.02);
    sweep.swept('claimed');
    sweep.swept('claimed');
    sweep.swept('expired');
    sweep.batch(0.01);
    sweep.dueToClaimed(0.03);
    consumer.count('processed');
    consumer.count('duplicate');
    consumer.count('dead');
    values = samples((await metrics.exposition()).body);
    expect(values.get('herald_relay_published_total{sink="amqp"}')).toBe(3);
    expect(values.get('herald_relay_failed_total{sink="amqp"}')).toBe(2);
    expect(values.get('herald_relay_dead_total{sink="amqp"}')).toBe(1);
    expect(values.get('herald_relay_confirm_duration_seconds_bucket{le="0.005",sink="amqp"}')).toBe(1);
    expect(values.get('herald_relay_batch_duration_seconds_count')).toBe(1);
    expect(
      values.get(
        'herald_sweeper_claims_total{aggregate="campaign",sweeper="campaign.claim",outcome="claimed"}',
      ),
    ).toBe(2);
    expect(
      values.get(
        'herald_sweeper_claims_total{aggregate="campaign",sweeper="campaign.claim",outcome="expired"}',
      ),
    ).toBe(1);
    expect(
      values.get('herald_sweeper_due_to_claimed_seconds_sum{aggregate="campaign",sweeper="campaign.claim"}'),
    ).toBeCloseTo(0.03);
    expect(
      values.get(
        'herald_consumer_messages_total{queue="line_q",consumer="line-delivery",outcome="processed"}',
      ),
    ).toBe(1);
    expect(
      values.get(
        'herald_consumer_messages_total{queue="line_q",consumer="line-delivery",outcome="duplicate"}',
      ),
    ).toBe(1);
    expect(
      values.get('herald_consumer_messages_total{queue="line_q",consumer="line-delivery",outcome="retried"}'),
    ).toBe(0);
    // No database attached: the database series are absent, and the database is not "up".
    expect([...values.keys()].some((key) => key.startsWith('herald_outbox_pending'))).toBe(false);
    expect(values.get('herald_metrics_database_up')).toBe(0);
  });

  it('reports the oldest claim any relay of the process holds, 0 when none does', async () => {
    const metrics = new HeraldMetrics();
    const claimedAt = performance.now() - 2_500;
    const stopA = metrics.trackRelayClaims(() => claimedAt);
    const stopB = metrics.trackRelayClaims(() => null);
    const age = samples((await metrics.exposition()).body).get('herald_relay_claim_age_seconds')!;
    expect(age).toBeGreaterThanOrEqual(2.5);
    expect(age).toBeLessThan(60);
    stopA(); // B holds nothing
    expect(samples((await metrics.exposition()).body).get('herald_relay_claim_age_seconds')).toBe(0);
    stopB();
    expect(samples((await metrics.exposition()).body).get('herald_relay_claim_age_seconds')).toBe(0);
  });
});

describe('prom-client', () => {
  it('is imported only by src/observability/ (and the HTTP API, which adds its series), never by domain code', () => {
    const src = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src');
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory()
          ? files(join(dir, entry.name))
          : entry.name.endsWith('.ts')
            ? [join(dir, entry.name)]
            : [],
      );
    const importers = files(src)
      .filter((file) => /from\s+'prom-client'/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(src, file));
    expect(importers).toContain('observability/metrics.ts');
    expect(importers.filter((file) => !/^(observability|api)\//.test(file))).toEqual([]);
  });
});
