/**
 * The SMPP path under faults (ADR 0022), over real TCP, PostgreSQL and Kafka:
 * - the SMSC simulator refuses what it cannot read (a PDU that does not decode, an unknown command, a
 *   wrong password), and the gateway survives a malformed deliver_sm (recorded, answered, same bind);
 * - a bind killed mid-window: the unanswered submits become UNCONFIRMED (charged, never resent), the
 *   rest is delivered, and no phone number received a part twice;
 * - ESME_RTHROTTLED for 20 s (an injected clock shared by the simulator and the gateway): the bind pauses
 *   and slows, nothing fails, everything is delivered afterwards.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayPartCounts } from '../../src/adapters/postgres/sms-gateway-queries.js';
import { SmppBind } from '../../src/adapters/smpp/smpp-client.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { silentLogger } from '../../src/logger.js';
import { waitFor } from '../../src/testing/wait.js';
import { KafkaFixture } from '../kafka/support/kafka-fixture.js';
import { spawnHerald } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { smppWorld } from '../support/smpp-world.js';
import { msisdns, ORG } from '../support/sms.js';
import { SMSC_PASSWORD, SMSC_SYSTEM_ID, startTestSmsc } from '../support/smsc.js';

let t: TestDatabase;
let kafka: KafkaFixture;
beforeAll(async () => {
  t = await createTestDatabase();
  kafka = await KafkaFixture.open();
  await new PostgresLedger(t.db).credit({ organizationId: ORG, key: 'top-up', amount: '100000' });
});
afterAll(async () => {
  await kafka?.close();
  await t?.drop();
});

/** Sends raw bytes to the SMSC and collects what comes back until `count` PDUs arrived. */
async function rawExchange(
  port: number,
  bytes: Buffer,
  count: number,
): Promise<{ commandId: number; status: number; sequence: number }[]> {
  const socket = connect(port, '127.0.0.1');
  const received: { commandId: number; status: number; sequence: number }[] = [];
  let buffer = Buffer.alloc(0);
  socket.on('data', (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    while (buffer.length >= 16 && buffer.length >= buffer.readUInt32BE(0)) {
      received.push({
        commandId: buffer.readUInt32BE(4),
        status: buffer.readUInt32BE(8),
        sequence: buffer.readUInt32BE(12),
      });
      buffer = buffer.subarray(buffer.readUInt32BE(0));
    }
  });
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(bytes);
  try {
    await waitFor(() => received.length >= count, { timeoutMs: 5_000, what: `${count} PDUs back` });
  } finally {
    socket.destroy();
  }
  return received;
}

function pdu(commandId: number, sequence: number, body: Buffer): Buffer {
  const header = Buffer.alloc(16);
  header.writeUInt32BE(16 + body.length, 0);
  header.writeUInt32BE(commandId, 4);
  header.writeUInt32BE(0, 8);
  header.writeUInt32BE(sequence, 12);
  return Buffer.concat([header, body]);
}

describe('malformed PDUs', () => {
  it('the simulator answers an undecodable PDU and an unknown command with generic_nack, and refuses a wrong password', async () => {
    const smsc = await startTestSmsc({ behaviour: t.config().sms.simulator });
    try {
      // bind_transmitter whose body ends in a TLV (0x0210, length 1) without its value byte.
      const bind = Buffer.concat([
        Buffer.from('herald\0secret\0\0', 'latin1'),
        Buffer.from([0x34, 0, 0, 0]),
        Buffer.from([0x02, 0x10, 0x00, 0x01]),
      ]);
      const answers = await rawExchange(
        smsc.port,
        Buffer.concat([pdu(0x00000002, 41, bind), pdu(0x00000777, 42, Buffer.alloc(0))]),
        2,
      );
      expect(answers).toEqual([
        { commandId: 0x80000000, status: 0x00000002, sequence: 41 }, // generic_nack, ESME_RINVCMDLEN
        { commandId: 0x80000000, status: 0x00000003, sequence: 42 }, // generic_nack, ESME_RINVCMDID
      ]);
      expect(smsc.stats.malformed).toBe(1);
      await expect(
        SmppBind.open({
          host: '127.0.0.1',
          port: smsc.port,
          systemId: SMSC_SYSTEM_ID,
          password: 'wrong',
          systemType: '',
          mode: 'transceiver',
          enquireLinkMs: 10_000,
          responseTimeoutMs: 2_000,
          connectTimeoutMs: 2_000,
          logger: silentLogger,
          name: 'test',
        }),
      ).rejects.toThrow(/refused: command_status 0xe/);
      const good = await SmppBind.open({
        host: '127.0.0.1',
        port: smsc.port,
        systemId: SMSC_SYSTEM_ID,
        password: SMSC_PASSWORD,
        systemType: '',
        mode: 'transceiver',
        enquireLinkMs: 10_000,
        responseTimeoutMs: 2_000,
        connectTimeoutMs: 2_000,
        logger: silentLogger,
        name: 'test',
      });
      await good.unbind();
      expect(smsc.stats).toMatchObject({ binds: 1, bindsRefused: 1 });
    } finally {
      await smsc.close();
    }
  });

  it('`herald sms-simulator --smpp` as a process: it listens, authenticates a bind, and stops on SIGTERM', async () => {
    const simulator = spawnHerald(['sms-simulator', '--smpp', '--port', '0', '--account', 'acme:pw'], {
      DATABASE_URL: t.url,
      HERALD_SCHEMA: t.schema,
      HERALD_LOG_LEVEL: 'warn',
    });
    try {
      const port = await waitFor(
        () => /SMSC simulator listening on 127\.0\.0\.1:(\d+)/.exec(simulator.output())?.[1],
        {
          timeoutMs: 30_000,
          what: 'the simulator listening',
        },
      );
      const bind = await SmppBind.open({
        host: '127.0.0.1',
        port: Number(port),
        systemId: 'acme',
        password: 'pw',
        systemType: '',
        mode: 'transmitter',
        enquireLinkMs: 10_000,
        responseTimeoutMs: 2_000,
        connectTimeoutMs: 5_000,
        logger: silentLogger,
        name: 'cli',
      });
      const { written, response } = bind.submit({
        serviceType: '',
        sourceAddr: 'HERALD',
        sourceTon: 5,
        sourceNpi: 0,
        destinationAddr: '8801711000123',
        destTon: 1,
        destNpi: 1,
        dataCoding: 0,
        shortMessage: Buffer.from('Hello'),
        udhIndicator: false,
        sar: null,
        registeredDelivery: 1,
      });
      expect(written).toBe(true);
      expect(await response).toMatchObject({ kind: 'response', commandStatus: 0 });
      await bind.unbind();
    } finally {
      expect(await simulator.stop()).toBe(0);
    }
  });

  it('the gateway records a malformed deliver_sm, answers it and keeps its bind; sending goes on', async () => {
    const world = await smppWorld(t, kafka);
    try {
      await waitFor(() => world.gateway!.status()[0]!.receiveBinds === 1, { what: 'the bind' });
      expect(await world.smsc.sendMalformedReceipt(SMSC_SYSTEM_ID, 'text')).toBe(0);
      await world.smsc.sendMalformedReceipt(SMSC_SYSTEM_ID, 'pdu');
      const { rows } = await waitFor(
        async () => {
          const result = await t.db.query<{ problem: string; raw: string }>(
            'select problem, raw from sms_gateway_receipt where problem is not null order by id',
          );
          return result.rows.length >= 2 ? result : undefined;
        },
        { what: 'two malformed deliver_sm recorded' },
      );
      expect(rows[0]!.problem).toMatch(/no message id/);
      expect(rows[1]!.problem).toMatch(/malformed PDU \(command 0x5\)/);
      expect(rows[1]!.raw).toMatch(/^0000/);
      const status = world.gateway!.status()[0]!;
      expect(status.stats.binds).toBe(1); // never re-bound
      expect(status.stats.malformed).toBe(2);

      const campaignId = await world.campaign(msisdns(5, '019', 900));
      expect(await world.final(campaignId)).toBe('COMPLETED');
      expect(world.gateway!.status()[0]!.stats.binds).toBe(1);
    } finally {
      await world.stop();
    }
  });
});

describe('a bind killed mid-window', () => {
  it('its unanswered submits become UNCONFIRMED and are never resent; the rest is delivered; no number gets a part twice', async () => {
    const world = await smppWorld(t, kafka, { smsc: { window: 10 } });
    try {
      await waitFor(() => world.gateway!.status()[0]!.transmitBinds === 1, { what: 'the bind' });
      // The 25th..30th submits are taken by the SMSC but never answered, then the bind dies.
      world.smsc.killBindAfter(30, 6);
      const campaignId = await world.campaign(msisdns(40, '017', 2_000));
      expect(await world.final(campaignId)).toBe('PARTIAL');
      const rows = await world.recipients(campaignId);
      const unconfirmed = rows.filter((r) => r.unconfirmed);
      expect(unconfirmed.length).toBeGreaterThanOrEqual(1);
      for (const r of unconfirmed) {
        expect(r).toMatchObject({
          status: 'FAILED',
          dlr_status: 'NOT_AVAILABLE',
          dlr_code: 'SMPP_UNCONFIRMED',
          attempts: 1,
        });
      }
      expect(rows.filter((r) => r.status === 'DELIVERED')).toHaveLength(40 - unconfirmed.length);
      expect(world.smsc.duplicates()).toEqual([]);
      expect(world.smsc.stats.dropped).toBe(6);
      expect(world.gateway!.status()[0]!.stats.binds).toBeGreaterThanOrEqual(2); // re-bound
      const parts = await gatewayPartCounts(t.db, campaignId);
      expect(parts.unconfirmed).toBeGreaterThanOrEqual(6);
      expect(parts.sending ?? 0).toBe(0);
      const money = await waitFor(
        async () => {
          const check = await world.money(campaignId);
          return check.balanced ? check : undefined;
        },
        { what: 'the money check balanced' },
      );
      expect(Number(money.unconfirmed)).toBeCloseTo(unconfirmed.length * 0.6, 4);
      expect(money.refunded).toBe('0.0000');
    } finally {
      await world.stop();
    }
  });
});

describe('ESME_RTHROTTLED', () => {
  it('for 20 s: the bind pauses and slows down, nothing fails, all delivered after', async () => {
    let now = Date.now();
    const clock = {
      now: () => now,
      sleep: async (ms: number) => {
        now += ms;
      },
    };
    const world = await smppWorld(t, kafka, { clock, smsc: { window: 10, tpsPerBind: 100 } });
    try {
      await waitFor(() => world.gateway!.status()[0]!.transmitBinds === 1, { what: 'the bind' });
      world.smsc.throttleFor(20_000);
      const stormStart = now;
      const campaignId = await world.campaign(msisdns(30, '018', 3_000));
      expect(await world.final(campaignId)).toBe('COMPLETED');
      const stats = world.gateway!.status()[0]!.stats;
      expect(stats.throttled).toBeGreaterThan(0);
      expect(stats.failed).toBe(0);
      expect(stats.unconfirmed).toBe(0);
      // Pauses of 1, 2, 4, 8 and 16 s cover the storm: a handful of windows were refused, not hundreds.
      expect(world.smsc.stats.throttled).toBeLessThanOrEqual(10 * 7);
      expect(now - stormStart).toBeGreaterThanOrEqual(20_000);
      const rows = await world.recipients(campaignId);
      expect(rows.every((r) => r.status === 'DELIVERED' && r.attempts === 1)).toBe(true);
      expect(world.smsc.duplicates()).toEqual([]);
      const { rows: throttledParts } = await t.db.query<{ throttled: number }>(
        'select max(throttled)::int as throttled from sms_gateway_part where campaign_id = $1',
        [campaignId],
      );
      expect(throttledParts[0]!.throttled).toBeGreaterThanOrEqual(1);
    } finally {
      await world.stop();
    }
  });
});

describe('fencing: a campaign that stops sending', () => {
  it('paused: its queued parts are withdrawn unsent and go after the resume; cancelled: withdrawn and refunded', async () => {
    const world = await smppWorld(t, kafka, {
      smsc: { window: 5 },
      env: {
        HERALD_SMS_GATEWAY_THROTTLE_BACKOFF_MS: '200',
        HERALD_SMS_GATEWAY_THROTTLE_MAX_BACKOFF_MS: '400',
      },
    });
    try {
      await waitFor(() => world.gateway!.status()[0]!.transmitBinds === 1, { what: 'the bind' });
      // The SMSC takes nothing for now: the parts stay queued at the gateway.
      world.smsc.throttleFor(3_600_000);
      const paused = await world.campaign(msisdns(6, '017', 7_000));
      const cancelled = await world.campaign(msisdns(4, '019', 7_000));
      // Both campaigns wholly submitted to the gateway (their parts queued there), the SMSC refusing.
      await waitFor(
        async () => {
          const rows = [...(await world.recipients(paused)), ...(await world.recipients(cancelled))];
          const parts = await t.db.query<{ n: number }>(
            'select count(*)::int as n from sms_gateway_part where campaign_id = any($1::uuid[])',
            [[paused, cancelled]],
          );
          return rows.every((r) => r.status === 'SUBMITTED') && parts.rows[0]!.n === 10 * 2;
        },
        { what: 'both campaigns queued at the gateway' },
      );
      await waitFor(() => world.smsc.stats.throttled >= 5, { what: 'the SMSC refusing' });
      await world.service.pause(paused, 'hold on');
      await world.service.cancel(cancelled, 'wrong audience');

      expect(await world.final(cancelled)).toBe('CANCELLED');
      await waitFor(
        async () =>
          (await world.recipients(paused)).every(
            (r) => r.status === 'RETRY_PENDING' || r.status === 'PENDING',
          ),
        { what: 'the paused campaign’s recipients withdrawn, waiting for a retry' },
      );
      const withdrawn = await world.recipients(paused);
      expect(
        withdrawn.every((r) => r.dlr_status === 'SEND_FAILED' && r.dlr_code === 'SMPP_WITHDRAWN:PAUSED'),
      ).toBe(true);
      // CANCELLED settles the recipients not yet handed over; those already at the gateway are withdrawn
      // there and reported failed (LATE) afterwards, through the roll-up.
      await waitFor(
        async () =>
          (await world.recipients(cancelled)).every(
            (r) => r.status === 'FAILED' && r.failure_class === 'LATE',
          ),
        { what: 'the cancelled campaign’s recipients withdrawn at the gateway, failed LATE' },
      );
      expect(world.smsc.stats.accepted).toBe(0);
      const money = await waitFor(
        async () => {
          const check = await world.money(cancelled);
          return check.balanced ? check : undefined;
        },
        { what: 'the cancelled campaign refunded' },
      );
      expect(money.refunded).toBe(money.charged);

      world.smsc.throttleFor(0);
      await world.service.resume(paused, 'go');
      expect(await world.final(paused)).toBe('COMPLETED');
      const sent = await world.recipients(paused);
      expect(sent.every((r) => r.status === 'DELIVERED' && r.attempts === 2)).toBe(true);
      expect(world.smsc.duplicates()).toEqual([]);
      expect(world.smsc.numbersReached).toBe(6); // the cancelled campaign's numbers got nothing
    } finally {
      await world.stop();
    }
  });
});
