/**
 * Losing the RabbitMQ node that leads the quorum queues under continuous load (issue 24 item 3, ADR 0040):
 * every aggregate's work flows (test/ha/support/load.ts) while the leader node is stopped (a graceful
 * shutdown: connections closed) or SIGKILLed (no goodbye: sockets reset, unconfirmed publishes lost in
 * flight). The quorum queues elect a leader on a surviving node, the relay and the consumers reconnect
 * to the next node of AMQP_URL, commands acknowledged after the loss are delivered too, nothing
 * acknowledged is lost and no message id has an effect twice (redeliveries are dropped by the inbox,
 * invariant 4); the money balances. The node is started again at the end (it rejoins the cluster).
 * This file STOPS, KILLS AND STARTS NODES of rabbitmq-cluster.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { formatReport, type HaLoad, startHaLoad } from './support/load.js';
import { rabbitmqWhole, services } from './support.js';

/** Herald's queues (the seeds' fixed names and their retry/dead companions). */
const HERALD_QUEUE = /^(action_execute|scheduled_action_fire|cron_events|process_campaign|line_)/;

interface QueueRow {
  name: string;
  leader: string;
}

/** Leader node number (1..3) per Herald queue, asked of node `askNode`. */
async function leaders(askNode: number): Promise<Map<string, number>> {
  const rows = JSON.parse(
    await services('rabbitmqctl', String(askNode), 'list_queues', 'name', 'leader', '--formatter', 'json'),
  ) as QueueRow[];
  return new Map(
    rows
      .filter((row) => HERALD_QUEUE.test(row.name))
      .map((row) => [row.name, Number(/herald-c(\d)@/.exec(row.leader)?.[1] ?? 0)]),
  );
}

/** The node leading most of Herald's queues (all of them, as the topology is declared on node 1). */
async function leadingNode(): Promise<{ node: number; queues: number }> {
  const count = new Map<number, number>();
  for (const node of (await leaders(1)).values()) count.set(node, (count.get(node) ?? 0) + 1);
  const [node, queues] = [...count].sort((a, b) => b[1] - a[1])[0]!;
  return { node, queues };
}

let load: HaLoad | undefined;
let down: number | undefined;
afterEach(async () => {
  await load?.close();
  load = undefined;
  if (down !== undefined) await services('node', 'start', 'rabbitmq-cluster', String(down));
  down = undefined;
  await rabbitmqWhole(); // the next test (or file) loses a node again
}, 240_000);

describe('the RabbitMQ node leading the quorum queues, under load', () => {
  it.each([
    { how: 'stopped', flags: [] as string[] },
    { how: 'SIGKILLed', flags: ['--kill'] },
  ])(
    '$how: publishes continue on the others, nothing acknowledged lost, no effect twice',
    async ({ how, flags }) => {
      await rabbitmqWhole();
      load = await startHaLoad();
      const running = load;
      running.start();
      await waitFor(() => running.acknowledged.length >= 30, { timeoutMs: 30_000, what: 'load flowing' });
      const leader = await leadingNode();

      down = leader.node;
      await services('node', 'stop', ...flags, 'rabbitmq-cluster', String(leader.node));
      const lostAt = Date.now();
      // Load goes on without the node: commands acknowledged after its loss must arrive too.
      await waitFor(() => running.acknowledged.filter((a) => a.at > lostAt).length >= 30, {
        timeoutMs: 60_000,
        what: 'commands acknowledged after the node was lost',
      });
      await running.stop();
      const report = await running.report(60_000);
      const surviving = [1, 2, 3].find((n) => n !== leader.node)!;
      const after = await leaders(surviving);
      console.log(
        `rabbitmq node ${leader.node} (leading ${leader.queues} queues) ${how}\n${formatReport(report)}`,
      );
      const why = report.ok ? '' : `${formatReport(report)}\n${running.output()}`;

      expect([...after.values()].filter((n) => n === leader.node || n === 0)).toEqual([]);
      expect(report.commands.failed, formatReport(report)).toBe(0);
      const after2xx = running.acknowledged.filter((a) => a.at > lostAt);
      expect(after2xx.some((a) => a.kind === 'action') && after2xx.some((a) => a.kind === 'line')).toBe(true);
      for (const kind of [report.line, report.action, report.cron, report.sms]) {
        expect(kind.lost, why).toBe(0);
        expect(kind.duplicated, why).toBe(0);
      }
      expect(report.money.balanced, why).toBe(true);
      expect(report.ok).toBe(true);
    },
    300_000,
  );
});
