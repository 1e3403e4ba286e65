/**
 * Losing the Kafka broker that leads the SMS topics' partitions under continuous load (issue 24 item 3,
 * ADR 0038): every aggregate's work flows (test/ha/support/load.ts; SMS submissions and delivery reports
 * go through kafka-cluster) while the broker leading most of those partitions is SIGKILLed. The
 * controllers elect leaders among the in-sync replicas left (min ISR 2), the relay's idempotent producer
 * (acks=all) and the consumers move to them: publishes continue, nothing acknowledged is lost, no SMS
 * part is submitted twice, and the money balances (invariants 3, 4, 9). The broker is started again and
 * the test waits until it is back in every ISR.
 * This file KILLS AND STARTS A BROKER of kafka-cluster.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { kafkaLeaders, kafkaWhole } from './support/kafka.js';
import { formatReport, type HaLoad, startHaLoad } from './support/load.js';
import { services } from './support.js';

let load: HaLoad | undefined;
let down: number | undefined;
afterEach(async () => {
  await load?.close();
  load = undefined;
  if (down !== undefined) {
    await services('node', 'start', 'kafka-cluster', String(down));
    await waitFor(kafkaWhole, { timeoutMs: 120_000, intervalMs: 1_000, what: 'kafka-cluster whole again' });
  }
  down = undefined;
}, 240_000);

describe('the Kafka broker leading the SMS partitions, under load', () => {
  it('SIGKILLed: publishes continue, nothing acknowledged lost, no effect twice, money balanced', async () => {
    load = await startHaLoad();
    const running = load;
    running.start();
    await waitFor(() => running.acknowledged.filter((a) => a.kind === 'sms').length >= 10, {
      timeoutMs: 30_000,
      what: 'SMS load flowing',
    });
    const before = await kafkaLeaders(running.kafkaTopics, 1);
    const count = new Map<number, number>();
    for (const leader of before) count.set(leader, (count.get(leader) ?? 0) + 1);
    const [leader, led] = [...count].sort((a, b) => b[1] - a[1])[0]!;

    down = leader;
    await services('node', 'stop', '--kill', 'kafka-cluster', String(leader));
    const lostAt = Date.now();
    // Load goes on without the broker: SMS campaigns acknowledged after its loss must be delivered too.
    await waitFor(() => running.acknowledged.filter((a) => a.at > lostAt && a.kind === 'sms').length >= 15, {
      timeoutMs: 60_000,
      what: 'SMS campaigns acknowledged after the broker was lost',
    });
    await running.stop();
    const report = await running.report(60_000);
    const surviving = [1, 2, 3].find((n) => n !== leader)!;
    const after = await kafkaLeaders(running.kafkaTopics, surviving);
    console.log(
      `kafka broker ${leader} (leading ${led} of ${before.length} partitions) SIGKILLed\n${formatReport(report)}`,
    );

    expect(after.filter((n) => n === leader || n < 0)).toEqual([]);
    expect(report.commands.failed, formatReport(report)).toBe(0);
    for (const kind of [report.line, report.action, report.cron, report.sms]) {
      expect(kind.lost, `${formatReport(report)}\n${running.output()}`).toBe(0);
      expect(kind.duplicated, formatReport(report)).toBe(0);
    }
    expect(report.sms.delivered).toBeGreaterThan(0);
    expect(report.money.balanced, formatReport(report)).toBe(true);
    expect(report.ok).toBe(true);
  });
});
