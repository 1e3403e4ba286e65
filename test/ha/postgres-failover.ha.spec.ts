/**
 * postgres-ha (ADR 0037): a commit through the proxy waits for the synchronous standby and is on it
 * when it returns; after `scripts/services failover postgres-ha` (the primary killed, the standby
 * promoted, the proxy re-pointed) under continuous load (test/ha/support/load.ts, ADR 0040): every command
 * the API acknowledged before the kill is on the promoted standby, the roles (processes from dist/) resume
 * by themselves within a measured bound — each one's first committed transition after the kill — the
 * LISTEN connection recovers, nothing acknowledged is lost or has an effect twice, the money balances
 * and `herald verify` is green.
 * This file FAILS THE DATABASE OVER (and rebuilds the standby at the end: `up postgres-ha`).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgWakeupListener } from '../../src/adapters/postgres/notifications.js';
import { waitFor } from '../../src/testing/wait.js';
import { herald } from '../support/cli.js';
import type { TestDatabase } from '../support/services.js';
import { type Acknowledged, formatReport, startHaLoad } from './support/load.js';
import { createHaDatabase, requireHa, services } from './support.js';

/** The roles must each commit a new transition within this many seconds of the kill (measured: see the guide). */
const RESUME_BOUND_SECONDS = 30;

let t: TestDatabase;
let failedOver = false;
const clients: pg.Client[] = [];

/** A connection to `url`'s database on the node at `nodeUrl` (bypassing the proxy). */
async function connectTo(url: string, nodeUrl?: string): Promise<pg.Client> {
  const target = new URL(url);
  if (nodeUrl) target.port = new URL(nodeUrl).port;
  const client = new pg.Client({ connectionString: target.toString() });
  client.on('error', () => {}); // the failover cuts it
  await client.connect();
  clients.push(client);
  return client;
}

/** The node URLs of postgres-ha by role, asked of the nodes themselves (a node that refuses: neither). */
async function roles(): Promise<{ primary?: string; standby?: string }> {
  const found: { primary?: string; standby?: string } = {};
  for (const nodeUrl of requireHa('HERALD_HA_PG_NODE_URLS').split(',')) {
    const client = await connectTo(nodeUrl).catch(() => undefined);
    if (!client) continue;
    const { rows } = await client.query<{ standby: boolean }>('select pg_is_in_recovery() as standby');
    found[rows[0]!.standby ? 'standby' : 'primary'] = nodeUrl;
  }
  return found;
}

beforeAll(async () => {
  t = await createHaDatabase();
});

afterAll(async () => {
  for (const client of clients) await client.end().catch(() => {});
  await t?.drop();
  if (failedOver) await services('up', 'postgres-ha'); // the old primary becomes the new standby
}, 240_000);

describe('postgres-ha', () => {
  it('a commit through the proxy waits for the synchronous standby, and is on the standby when it returns', async () => {
    const { standby } = await roles();
    if (!standby) throw new Error('postgres-ha has no standby: run `scripts/services up postgres-ha`');
    const writer = await connectTo(t.url);
    const observer = await connectTo(t.url);
    const reader = await connectTo(t.url, standby);
    await writer.query('create table ha_sync_probe (id int primary key)');
    const { rows: replication } = await observer.query<{ sync_state: string }>(
      'select sync_state from pg_stat_replication',
    );
    expect(replication).toEqual([{ sync_state: 'sync' }]);

    // The standby's WAL receiver stops acknowledging: the commit must wait for it (wait event SyncRep).
    const { rows: receiver } = await reader.query<{ pid: number }>('select pid from pg_stat_wal_receiver');
    const walReceiver = receiver[0]!.pid;
    const writerPid = (await writer.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    process.kill(walReceiver, 'SIGSTOP');
    let committed = false;
    let commit: Promise<unknown>;
    try {
      commit = writer.query('insert into ha_sync_probe values (1)').then(() => {
        committed = true;
      });
      await waitFor(
        async () =>
          (
            await observer.query('select 1 from pg_stat_activity where pid = $1 and wait_event = $2', [
              writerPid,
              'SyncRep',
            ])
          ).rowCount === 1,
        { what: 'the commit waiting for the standby' },
      );
      expect(committed).toBe(false);
    } finally {
      process.kill(walReceiver, 'SIGCONT');
    }
    await commit;
    await waitFor(
      async () => (await reader.query('select 1 from ha_sync_probe where id = 1')).rowCount === 1,
      {
        what: 'the row replayed on the standby',
      },
    );
  });

  it('under load: every command acknowledged before the kill is there after it, the roles resume by themselves, verify is green', async () => {
    const before = await roles();
    const load = await startHaLoad();
    const listener = new PgWakeupListener({ url: load.t.url, schema: load.t.schema });
    const heard: string[] = [];
    try {
      await listener.subscribe('ha_probe', (payload) => {
        if (payload) heard.push(payload);
      });
      load.start();
      await waitFor(() => load.acknowledged.length >= 30, { timeoutMs: 30_000, what: 'load flowing' });

      // The standby falls behind before the kill: the primary's WAL sender is stopped (SIGSTOP), so the
      // commits of the last moment never leave the primary. Synchronous commit holds their acknowledgement
      // (backends wait on SyncRep); with it off they would be acknowledged, then lost with the primary.
      // (Stopping the standby's receiver instead is not enough: the WAL already in the socket reaches it.)
      const observer = await connectTo(load.t.url);
      const walSender = (await observer.query<{ pid: number }>('select pid from pg_stat_replication')).rows[0]
        ?.pid;
      if (!walSender)
        throw new Error('postgres-ha has no streaming standby: run `scripts/services up postgres-ha`');
      let killedAt: Date;
      let beforeKill: Acknowledged[];
      process.kill(walSender, 'SIGSTOP');
      try {
        // Commits written on the primary that the standby has not got (16 kB of WAL: dozens of commits).
        await waitFor(
          async () =>
            (
              await observer.query<{ behind: boolean }>(
                'select pg_wal_lsn_diff(pg_current_wal_lsn(), sent_lsn) > 16384 as behind from pg_stat_replication',
              )
            ).rows[0]?.behind === true,
          { timeoutMs: 30_000, what: 'the standby behind the primary' },
        );
        // The kill's instant on the database clock (a read: it waits for no standby).
        killedAt = (await observer.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]!.now;
        // The stopped sender ends with the primary (immediate shutdown SIGKILLs what does not quit in 5 s).
        const failover = services('failover', 'postgres-ha');
        failedOver = true;
        // Once the primary refuses connections, no acknowledgement can come before the proxy moves.
        await waitFor(
          async () =>
            !(await connectTo(load.t.url, before.primary).then(
              () => true,
              () => false,
            )),
          { intervalMs: 10, what: 'the primary killed' },
        );
        beforeKill = [...load.acknowledged];
        await failover;
      } catch (error) {
        try {
          process.kill(walSender, 'SIGCONT'); // the failover did not happen: let the pair heal
        } catch {}
        throw error;
      }
      // Transitions stamped after this instant (the new primary's clock, the host's) were committed on it:
      // the old primary is dead by now. The measured resume is an upper bound of the true one.
      // The test's own pool may still hold an idle connection to the old primary: the first query on it
      // fails, and the pool replaces it (as the roles' retries do).
      let promotedAt: Date | undefined;
      await waitFor(
        async () => {
          const { rows } = await load.t.db
            .query<{ now: Date }>('select clock_timestamp() as now')
            .catch(() => ({ rows: [] as { now: Date }[] }));
          promotedAt = rows[0]?.now;
          return promotedAt !== undefined;
        },
        { timeoutMs: 30_000, intervalMs: 50, what: 'the test pool on the promoted primary' },
      );
      const failedOverAt = Date.now();
      expect(await roles()).toEqual({ primary: before.standby });

      await waitFor(() => load.acknowledged.filter((a) => a.at > failedOverAt).length >= 40, {
        timeoutMs: 90_000,
        what: `commands acknowledged after the failover\n${load.output()}`,
      });
      await load.stop();
      const report = await load.report(90_000);

      // Every command acknowledged before the kill is on the promoted standby.
      const present = async (table: string, ids: string[]) =>
        (
          await load.t.db.query<{ n: number }>(
            `select count(*)::int as n from ${table} where id = any($1::uuid[])`,
            [ids],
          )
        ).rows[0]!.n;
      const idsOf = (kinds: string[]) => beforeKill.filter((a) => kinds.includes(a.kind)).map((a) => a.id);
      expect(await present('campaign', idsOf(['line', 'sms']))).toBe(idsOf(['line', 'sms']).length);
      expect(await present('scheduled_action', idsOf(['action']))).toBe(idsOf(['action']).length);
      expect(await present('cron_job', idsOf(['cron']))).toBe(idsOf(['cron']).length);

      // Each role's first committed transition after the kill, on the database clock.
      const { rows: resumed } = await load.t.db.query<{ role: string; seconds: number | null }>(
        `select p.role, extract(epoch from (
                  case when p.role = 'relay' then (select min(sent_at) from outbox where sent_at > $2)
                       when p.role = 'sms-gateway' then (select least(min(sending_at) filter (where sending_at > $2),
                                                                      min(resp_at) filter (where resp_at > $2))
                                                           from sms_gateway_part)
                       else (select min(recorded_at) from event where recorded_at > $2 and meta->>'pod' = p.pod)
                  end) - $1)::float8 as seconds
           from unnest($3::text[], $4::text[]) as p(role, pod)`,
        [killedAt, promotedAt, Object.keys(load.pods), Object.values(load.pods)],
      );
      const failoverSeconds = (promotedAt!.getTime() - killedAt.getTime()) / 1_000;
      const bound = Math.max(...resumed.map((r) => r.seconds ?? Number.POSITIVE_INFINITY));
      console.log(
        `postgres-ha failover under load: promoted and reachable ${failoverSeconds.toFixed(2)} s after the kill; resumed (s after the kill): ${resumed.map((r) => `${r.role} ${r.seconds?.toFixed(2)}`).join(', ')}\n${formatReport(report)}`,
      );
      expect(
        resumed.filter((r) => r.seconds === null),
        `${formatReport(report)}\n${load.output()}`,
      ).toEqual([]);
      expect(bound).toBeLessThan(RESUME_BOUND_SECONDS);

      const why = report.ok ? '' : `${formatReport(report)}\n${load.output()}`;
      for (const kind of [report.line, report.action, report.cron, report.sms]) {
        expect(kind.lost, why).toBe(0);
        expect(kind.duplicated, why).toBe(0);
      }
      expect(report.money.balanced, why).toBe(true);
      // Every role still running: none needed a restart.
      for (const [name, role] of load.roles) expect(role.process.exitCode, name).toBeNull();

      // The LISTEN connection is back: a notification sent now (on the new primary) arrives.
      await waitFor(
        async () => {
          await load.t.db.query(`select pg_notify('ha_probe', 'after-failover')`);
          return heard.includes('after-failover');
        },
        { timeoutMs: 30_000, intervalMs: 500, what: 'a notification through the re-established LISTEN' },
      );
      // The real CLI folds every stream and compares it with its state row.
      const verify = await herald(load.t, ['verify']);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    } finally {
      await listener.close();
      await load.close();
    }
  }, 300_000);
});
