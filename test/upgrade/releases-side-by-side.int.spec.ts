/**
 * A rolling upgrade, N → N+1 → N+2, with real role processes (ADR 0039): each release's relay and
 * worker run as a child process (support/release-process.ts) against one database and one broker, and
 * the work — wallet commands on a queue — keeps flowing while the releases overlap: N alone, N and N+1,
 * N+1 alone, N+1 and N+2, N+2 alone. The fixture changes the shape of `Credited` (version 1 → 2) and of
 * its message, following the rollout rule (N+1 reads 2 and writes 1; N+2 writes 2). Afterwards nothing
 * is lost or doubled — every command applied once, every credit's message consumed once, the balances
 * add up — and every stream folds to its stored row under N+1 and N+2 (`herald verify`'s check).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStates } from '../../src/projections/verify.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../support/services.js';
import {
  createCreditSeenTable,
  createWalletTable,
  type Release,
  WALLET,
  walletQueues,
  walletRegistration,
} from './wallet-releases.js';

const prefix = uniqueName('wallet_rollout');
const queues = walletQueues(prefix);
const WALLETS = 8;
const PER_PHASE = 30;

let t: TestDatabase;
let broker: ChannelModel;
let publisher: ConfirmChannel;
const processes = new Map<Release, ChildProcess>();

function startRelease(release: Release): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/upgrade/support/release-process.ts'], {
    env: {
      ...process.env,
      DATABASE_URL: t.url,
      HERALD_SCHEMA: t.schema,
      HERALD_LOG_LEVEL: 'silent',
      WALLET_RELEASE: release,
      WALLET_PREFIX: prefix,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  processes.set(release, child);
  return child;
}

async function stopRelease(release: Release): Promise<void> {
  const child = processes.get(release)!;
  processes.delete(release);
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  expect(code, `release ${release} exits 0 on SIGTERM`).toBe(0);
}

/** Consumers on the command queue (one per running release's worker). */
async function commandConsumers(): Promise<number> {
  const channel = await broker.createChannel();
  channel.on('error', () => {});
  try {
    return (await channel.checkQueue(queues.commands)).consumerCount;
  } catch {
    return 0; // not declared yet
  } finally {
    await channel.close().catch(() => {});
  }
}

const credits: { walletId: string; amountMinor: number }[] = [];
async function publish(
  work: { walletId: string; op: 'open' | 'credit'; amountMinor?: number }[],
): Promise<void> {
  for (const item of work) {
    publisher.sendToQueue(queues.commands, Buffer.from(JSON.stringify(item)), {
      persistent: true,
      contentType: 'application/json',
      messageId: randomUUID(),
    });
    if (item.op === 'credit') credits.push({ walletId: item.walletId, amountMinor: item.amountMinor! });
  }
  await publisher.waitForConfirms();
}

/** The next phase's credits: PER_PHASE of them across the wallets, amounts 1..500 minor units. */
function phase(n: number) {
  return Array.from({ length: PER_PHASE }, (_, i) => ({
    walletId: `w-${i % WALLETS}`,
    op: 'credit' as const,
    amountMinor: ((n * PER_PHASE + i) * 37) % 500 || 1,
  }));
}

const count = async (sql: string) => (await t.db.query<{ n: number }>(sql)).rows[0]!.n;

beforeAll(async () => {
  t = await createTestDatabase();
  await createWalletTable(t.db);
  await createCreditSeenTable(t.db);
  broker = await amqp.connect(requireEnv('AMQP_URL'));
  publisher = await broker.createConfirmChannel();
});
afterAll(async () => {
  for (const child of processes.values()) child.kill('SIGKILL');
  const channel = await broker?.createChannel();
  for (const queue of Object.values(queues)) {
    for (const name of [queue, `${queue}.dead`]) await channel?.deleteQueue(name).catch(() => {});
  }
  await broker?.close();
  await t?.drop();
});

describe('releases N, N+1 and N+2 rolled out one after the other under load', () => {
  it('lose nothing, double nothing, and every stream folds to its row', async () => {
    startRelease('N');
    await waitFor(async () => (await commandConsumers()) >= 1, {
      what: 'release N consuming',
      timeoutMs: 60_000,
    });
    await publish(Array.from({ length: WALLETS }, (_, i) => ({ walletId: `w-${i}`, op: 'open' as const })));
    await waitFor(async () => (await count('select count(*)::int as n from wallet')) === WALLETS, {
      what: 'the wallets opened',
    });
    await publish(phase(0));

    /** Starts `release` beside the running one, once both consume the commands. */
    const startBeside = async (release: Release) => {
      startRelease(release);
      await waitFor(async () => (await commandConsumers()) >= 2, {
        what: `release ${release} consuming`,
        timeoutMs: 60_000,
      });
    };

    await startBeside('N+1'); // N and N+1 side by side
    await publish(phase(1));
    await stopRelease('N'); // N+1 alone
    await publish(phase(2));

    await startBeside('N+2'); // N+1 and N+2 side by side
    await publish(phase(3));
    await stopRelease('N+1'); // N+2 alone
    await publish(phase(4));

    const commands = WALLETS + 5 * PER_PHASE;
    await waitFor(
      async () =>
        (await count("select count(*)::int as n from inbox where consumer = 'wallet-commands'")) ===
          commands && (await count('select count(*)::int as n from wallet_credit_seen')) === credits.length,
      { what: 'every command applied and every credit message consumed', timeoutMs: 90_000 },
    );
    await stopRelease('N+2');

    // Nothing lost, nothing doubled: one inbox row per message, all processed; balances add up.
    expect(await count("select count(*)::int as n from inbox where status <> 'processed'")).toBe(0);
    const { rows: wallets } = await t.db.query<{ id: string; balance_minor: string; credits: number }>(
      'select id, balance_minor, credits from wallet order by id',
    );
    for (const wallet of wallets) {
      const mine = credits.filter((c) => c.walletId === wallet.id);
      expect({ id: wallet.id, balance: Number(wallet.balance_minor), credits: wallet.credits }).toEqual({
        id: wallet.id,
        balance: mine.reduce((sum, c) => sum + c.amountMinor, 0),
        credits: mine.length,
      });
    }
    const seen = await t.db.query<{ n: number; total: string }>(
      'select count(*)::int as n, sum(amount_minor) as total from wallet_credit_seen',
    );
    expect(seen.rows[0]).toEqual({
      n: credits.length,
      total: String(credits.reduce((sum, c) => sum + c.amountMinor, 0)),
    });
    expect(await count("select count(*)::int as n from outbox where status <> 'sent'")).toBe(0);

    // The rollout rule, as written: N and N+1 wrote Credited in version 1, N+2 in version 2.
    const { rows: written } = await t.db.query<{ pod: string; schema_version: number; n: number }>(
      `select meta->>'pod' as pod, schema_version, count(*)::int as n from event
        where stream_type = 'wallet' and type = 'Credited' group by 1, 2 order by 1, 2`,
    );
    for (const row of written) expect(row.schema_version).toBe(row.pod === 'release-N+2' ? 2 : 1);
    expect(written.map((r) => r.pod)).toContain('release-N+2');
    expect(written.map((r) => r.pod)).toContain('release-N');

    // `herald verify`'s check under each release that reads every version written.
    for (const release of ['N+1', 'N+2'] as const) {
      const registry = new AggregateRegistry([walletRegistration(release, prefix)]);
      const report = await verifyStates(t.db, registry, { streamTypes: [WALLET] });
      expect(report.drifts).toEqual([]);
      expect(report.streams).toBe(WALLETS);
    }
  });
});
