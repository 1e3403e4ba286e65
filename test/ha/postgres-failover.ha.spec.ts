/**
 * postgres-ha (ADR 0037): a commit through the proxy waits for the synchronous standby and is on it
 * when it returns; after `scripts/services failover postgres-ha` (the primary killed, the standby
 * promoted, the proxy re-pointed) Herald's pool and LISTEN connection recover by themselves: running
 * roles are not restarted, and a scheduled action created before the failover fires after it.
 * This file FAILS THE DATABASE OVER (and rebuilds the standby at the end: `up postgres-ha`).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgWakeupListener } from '../../src/adapters/postgres/notifications.js';
import { waitFor } from '../../src/testing/wait.js';
import { actionsHarness, normalAction } from '../support/actions.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import type { TestDatabase } from '../support/services.js';
import { createHaDatabase, requireHa, services } from './support.js';

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

  it('after a failover the pool and LISTEN recover without a restart: an action scheduled before fires after', async () => {
    const before = await roles();
    const config = t.config({
      HERALD_ACTIONS_DISPATCH: 'in-process',
      HERALD_ACTIONS_RETRY_BASE_MS: '50',
      HERALD_ACTIONS_RETRY_MAX_MS: '500',
      HERALD_ACTIONS_STALE_SECONDS: '2',
      HERALD_ACTIONS_HEARTBEAT_SECONDS: '1',
      HERALD_RELAY_IDLE_POLL_MS: '200',
    });
    const running: RunningRoles = startRoles(config, { relay: true, worker: true });
    const listener = new PgWakeupListener({ url: t.url, schema: t.schema });
    const heard: string[] = [];
    try {
      await listener.subscribe('ha_probe', (payload) => {
        if (payload) heard.push(payload);
      });
      const { service } = actionsHarness(t, { dispatch: 'in-process' });
      const action = await service.schedule(normalAction({ delaySeconds: 3 }));

      await services('failover', 'postgres-ha');
      failedOver = true;
      expect(await roles()).toEqual({ primary: before.standby });

      const done = await waitFor(
        async () => {
          const state = await service.get(action.actionId);
          return state.status === 'done' && state;
        },
        { timeoutMs: 60_000, what: 'the action to fire on the promoted standby' },
      );
      expect(done).toMatchObject({ outcome: 'executed' });
      // Its action_execute message left through the relay, which recovered too.
      await waitFor(
        async () =>
          (
            await t.db.query(
              `select 1 from outbox where destination = 'action_execute' and payload->>'actionId' = $1 and status = 'sent'`,
              [action.actionId],
            )
          ).rowCount === 1,
        { timeoutMs: 60_000, what: 'the action_execute message sent' },
      );
      // The LISTEN connection is back: a notification sent now (on the new primary) arrives.
      await waitFor(
        async () => {
          await t.db.query(`select pg_notify('ha_probe', 'after-failover')`);
          return heard.includes('after-failover');
        },
        { timeoutMs: 30_000, intervalMs: 500, what: 'a notification through the re-established LISTEN' },
      );
    } finally {
      await listener.close();
      await running.stop(); // rejects if a role died instead of recovering
    }
  });
});
