/**
 * The SMSC simulator (`herald sms-simulator --smpp`, and the tests' in-process fixture; ADR 0022): an SMPP
 * 3.4 server on node-smpp that behaves like an operator's SMSC for `herald sms-gateway`. It authenticates
 * binds by system_id and password, answers each submit_sm with a message id (or an error), and later
 * sends a delivery receipt (`id:… stat:… err:…` text plus the receipted_message_id and message_state
 * TLVs) on any receiver or transceiver bind of the same system_id, holding receipts while none is bound.
 * Outcomes follow HERALD_SMS_SIMULATOR_* like the Kafka simulator, with its test numbers (REJECTED,
 * FAILED with an absent-subscriber code, NOT_AVAILABLE as `stat:UNKNOWN`). It can throttle (answer
 * ESME_RTHROTTLED above a rate, or for a while), drop responses, delay receipts, kill a bind, send a
 * malformed deliver_sm, and counts what each phone number received, part by part, so a test can assert
 * that no number received a part twice. Every PDU that does not decode is answered with generic_nack.
 */
import { renameSync, writeFileSync } from 'node:fs';
import type { MalformedPdu } from '../../../adapters/smpp/framed-session.js';
import type { SmppServerConnection } from '../../../adapters/smpp/smpp-server.js';
import {
  type InboundSubmit,
  type SmppServer,
  type SubmitAnswer,
  startSmppServer,
} from '../../../adapters/smpp/smpp-server.js';
import { parse, UsageError } from '../../../cli/one-shot.js';
import { SMPP_STATUS } from '../../../domain/sms/smpp-outcome.js';
import type { Logger } from '../../../logger.js';
import type { SmsSettings } from './settings.js';
import { simulatedOutcome } from './simulator.js';

const ESME_RINVPASWD = 0x0e;
const ESME_RINVSYSID = 0x0f;
const ESME_RINVDSTADR = 0x0b;
const ESME_RINVDCS = 0x104;

/** message_state TLV values (SMPP 3.4 §5.2.28) and receipt text of each simulated outcome. */
const RECEIPT_OF: Readonly<Record<string, { stat: string; state: number }>> = {
  DELIVERED: { stat: 'DELIVRD', state: 2 },
  EXPIRED: { stat: 'EXPIRED', state: 3 },
  FAILED: { stat: 'UNDELIV', state: 5 },
  REJECTED: { stat: 'REJECTD', state: 8 },
  NOT_AVAILABLE: { stat: 'UNKNOWN', state: 7 },
};

export interface SmscSimulatorOptions {
  host?: string;
  /** 0: any free port. */
  port?: number;
  /** system_id → password. */
  accounts: ReadonlyMap<string, string>;
  /** Outcomes, latency, failed codes and test numbers (HERALD_SMS_SIMULATOR_*). */
  behaviour: SmsSettings['simulator'];
  /** Submits accepted per second per system_id before ESME_RTHROTTLED (undefined: no limit). */
  tps?: number;
  /** The clock the throttle windows read (tests inject one). */
  now?: () => number;
  logger: Logger;
}

interface StoredMessage {
  messageId: string;
  systemId: string;
  msisdn: string;
  sourceAddr: string;
  status: string;
  errorCode: string | null;
  submittedAt: number;
}

/** The submit_sm taken in a period (since start or the previous `takePeriod()`), timed at the SMSC. */
export interface SubmitPeriod {
  submits: number;
  /** Epoch ms (µs resolution) of the period's first and last submit_sm, null when none came. */
  firstSubmitAt: number | null;
  lastSubmitAt: number | null;
}

/** What the simulator received (cumulative) plus the period's timing: `herald sms-simulator --smpp --received-file`. */
export interface ReceivedReport {
  period: SubmitPeriod;
  stats: SmscStats;
  /** Distinct part texts; `received` names them by index. */
  texts: string[];
  /** msisdn → [text index, concatenation reference, total, seq, times received] per distinct part. */
  received: Record<string, [number, number, number, number, number][]>;
}

export interface SmscStats {
  binds: number;
  bindsRefused: number;
  submits: number;
  accepted: number;
  throttled: number;
  rejected: number;
  dropped: number;
  receiptsSent: number;
  receiptsPending: number;
  malformed: number;
  killed: number;
  unbinds: number;
}

function udhConcatenation(udh: readonly Uint8Array[]): { ref: number; total: number; seq: number } | null {
  for (const ie of udh) {
    if (ie[0] === 0x00 && ie[1] === 3) return { ref: ie[2]!, total: ie[3]!, seq: ie[4]! };
    if (ie[0] === 0x08 && ie[1] === 4) return { ref: (ie[2]! << 8) | ie[3]!, total: ie[4]!, seq: ie[5]! };
  }
  return null;
}

function receiptDate(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getUTCFullYear() % 100)}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}`;
}

export class SmscSimulator {
  private server: SmppServer | undefined;
  private nextMessage = 1;
  private readonly now: () => number;
  private tps: number | undefined;
  private throttleUntil = 0;
  private readonly windows = new Map<string, { second: number; count: number }>();
  private dropNext = 0;
  private killAfter: { submits: number; dropLast: number } | null = null;
  private receiptsHeld = false;
  private readonly pending = new Map<string, StoredMessage[]>();
  /** msisdn → part key (`<text>/<ref>/<total>/<seq>`) → times received. */
  private readonly received = new Map<string, Map<string, number>>();
  /** Submits since the last `takePeriod()` (benchmarks time a run at the SMSC), epoch ms. */
  private period: SubmitPeriod = { submits: 0, firstSubmitAt: null, lastSubmitAt: null };
  readonly stats: SmscStats = {
    binds: 0,
    bindsRefused: 0,
    submits: 0,
    accepted: 0,
    throttled: 0,
    rejected: 0,
    dropped: 0,
    receiptsSent: 0,
    receiptsPending: 0,
    malformed: 0,
    killed: 0,
    unbinds: 0,
  };
  readonly malformedSeen: MalformedPdu[] = [];

  constructor(private readonly options: SmscSimulatorOptions) {
    this.now = options.now ?? Date.now;
    this.tps = options.tps;
  }

  get port(): number {
    if (!this.server) throw new Error('the SMSC simulator is not started');
    return this.server.port;
  }

  async start(): Promise<this> {
    this.server = await startSmppServer({
      host: this.options.host ?? '127.0.0.1',
      port: this.options.port ?? 0,
      logger: this.options.logger,
      handlers: {
        onBind: (bind) => {
          const password = this.options.accounts.get(bind.systemId);
          if (password === undefined) {
            this.stats.bindsRefused++;
            return ESME_RINVSYSID;
          }
          if (password !== bind.password) {
            this.stats.bindsRefused++;
            return ESME_RINVPASWD;
          }
          this.stats.binds++;
          if (bind.mode !== 'transmitter') setImmediate(() => this.flushReceipts(bind.systemId));
          return 0;
        },
        onSubmit: (connection, submit) => this.submit(connection, submit),
        onUnbind: () => {
          this.stats.unbinds++;
        },
        onMalformed: (_connection, malformed) => {
          this.stats.malformed++;
          this.malformedSeen.push(malformed);
        },
      },
    });
    this.options.logger.info({ port: this.server.port }, 'SMSC simulator listening');
    return this;
  }

  async close(): Promise<void> {
    await this.server?.close();
  }

  /** Open bound connections (for tests). */
  connections(systemId?: string): SmppServerConnection[] {
    return [...(this.server?.connections ?? [])].filter(
      (c) => c.bound !== null && (systemId === undefined || c.bound.systemId === systemId),
    );
  }

  // ---- behaviour, changeable while running ----

  /** Accept at most `tps` submits a second per system_id; more are ESME_RTHROTTLED (undefined: no limit). */
  setTps(tps: number | undefined): void {
    this.tps = tps;
  }

  /** Answer every submit ESME_RTHROTTLED for `ms` (of the simulator's clock). */
  throttleFor(ms: number): void {
    this.throttleUntil = this.now() + ms;
  }

  /** The next `count` submits are taken (the phone gets them) but never answered. */
  dropResponses(count: number): void {
    this.dropNext = count;
  }

  /** After `submits` more submits the bind that took the last one dies; its last `dropLast` go unanswered. */
  killBindAfter(submits: number, dropLast = 0): void {
    this.killAfter = { submits, dropLast };
  }

  /** Receipts wait (are held) until released. */
  holdReceipts(hold: boolean): void {
    this.receiptsHeld = hold;
    if (!hold) for (const systemId of this.pending.keys()) this.flushReceipts(systemId);
  }

  /** Kills every bound connection (of a system_id). */
  killBinds(systemId?: string): number {
    const bound = this.connections(systemId);
    for (const connection of bound) connection.kill();
    this.stats.killed += bound.length;
    return bound.length;
  }

  /** Sends a deliver_sm the gateway cannot read: `text` (a receipt without id or state) or `pdu` (undecodable). */
  async sendMalformedReceipt(systemId: string, kind: 'text' | 'pdu'): Promise<number | null> {
    const connection = this.connections(systemId).find((c) => c.bound?.mode !== 'transmitter');
    if (!connection) throw new Error(`no receiver bind of ${systemId}`);
    if (kind === 'text') {
      return connection.deliver({
        sourceAddr: '8801700000000',
        destinationAddr: 'HERALD',
        text: 'this is no receipt',
      });
    }
    // A deliver_sm whose message_state TLV (0x0427, length 1) has no value byte: the TLV runs past the PDU.
    const body = Buffer.from([
      0, // service_type ""
      0,
      0,
      0, // source_addr_ton, source_addr_npi, source_addr ""
      0,
      0,
      0, // dest_addr_ton, dest_addr_npi, destination_addr ""
      0x04,
      0,
      0, // esm_class (a receipt), protocol_id, priority_flag
      0,
      0, // schedule_delivery_time "", validity_period ""
      0,
      0,
      0,
      0, // registered_delivery, replace_if_present_flag, data_coding, sm_default_msg_id
      0, // sm_length 0
      0x04,
      0x27,
      0x00,
      0x01, // message_state TLV of length 1 … without its value byte
    ]);
    const header = Buffer.alloc(16);
    header.writeUInt32BE(16 + body.length, 0);
    header.writeUInt32BE(0x00000005, 4);
    header.writeUInt32BE(0, 8);
    header.writeUInt32BE(0x7ffffff0, 12);
    connection.writeRaw(Buffer.concat([header, body]));
    return null;
  }

  // ---- what the phones received ----

  /** Parts received per number: `key → times` (key: part text, reference, total, seq). */
  receivedBy(msisdn: string): ReadonlyMap<string, number> {
    return this.received.get(msisdn) ?? new Map();
  }

  /** Numbers that received some part more than once, with the part and the count. */
  duplicates(): { msisdn: string; part: string; times: number }[] {
    const out: { msisdn: string; part: string; times: number }[] = [];
    for (const [msisdn, parts] of this.received) {
      for (const [part, times] of parts) if (times > 1) out.push({ msisdn, part, times });
    }
    return out;
  }

  /** Numbers that received anything. */
  get numbersReached(): number {
    return this.received.size;
  }

  /** Parts received in all. */
  get partsReceived(): number {
    let total = 0;
    for (const parts of this.received.values()) for (const times of parts.values()) total += times;
    return total;
  }

  // ---- the SMSC ----

  private throttled(systemId: string): boolean {
    const now = this.now();
    if (now < this.throttleUntil) return true;
    if (this.tps === undefined) return false;
    const second = Math.floor(now / 1000);
    const window = this.windows.get(systemId);
    if (!window || window.second !== second) {
      this.windows.set(systemId, { second, count: 1 });
      return false;
    }
    window.count++;
    return window.count > this.tps;
  }

  /**
   * Everything received so far (by number and part, with the times each came) and the timing of the
   * submits since the previous call, which starts a new period.
   */
  takePeriod(): ReceivedReport {
    const texts = new Map<string, number>();
    const received: ReceivedReport['received'] = {};
    for (const [msisdn, parts] of this.received) {
      const entries: [number, number, number, number, number][] = [];
      for (const [key, times] of parts) {
        // `<text>/<ref>/<total>/<seq>`: the text may contain '/', the three numbers do not.
        const pieces = key.split('/');
        const [ref, total, seq] = pieces.slice(-3).map(Number) as [number, number, number];
        const text = pieces.slice(0, -3).join('/');
        let index = texts.get(text);
        if (index === undefined) {
          index = texts.size;
          texts.set(text, index);
        }
        entries.push([index, ref, total, seq, times]);
      }
      received[msisdn] = entries;
    }
    const period = this.period;
    this.period = { submits: 0, firstSubmitAt: null, lastSubmitAt: null };
    return { period, stats: { ...this.stats }, texts: [...texts.keys()], received };
  }

  private submit(connection: SmppServerConnection, submit: InboundSubmit): SubmitAnswer {
    this.stats.submits++;
    const at = performance.timeOrigin + performance.now();
    this.period.submits++;
    this.period.firstSubmitAt ??= at;
    this.period.lastSubmitAt = at;
    const systemId = connection.bound!.systemId;
    if (this.throttled(systemId)) {
      this.stats.throttled++;
      return { commandStatus: SMPP_STATUS.ESME_RTHROTTLED, messageId: '' };
    }
    const msisdn = submit.destinationAddr.replace(/^\+/, '');
    if (!/^\d{6,15}$/.test(msisdn)) {
      this.stats.rejected++;
      return { commandStatus: ESME_RINVDSTADR, messageId: '' };
    }
    if (submit.dataCoding !== 0 && submit.dataCoding !== 8) {
      this.stats.rejected++;
      return { commandStatus: ESME_RINVDCS, messageId: '' };
    }
    const concat =
      submit.sar.total !== undefined && submit.sar.seq !== undefined
        ? { ref: submit.sar.ref ?? 0, total: submit.sar.total, seq: submit.sar.seq }
        : udhConcatenation(submit.udh);
    const part = `${submit.text}/${concat ? `${concat.ref}/${concat.total}/${concat.seq}` : '1/1/1'}`;
    const parts = this.received.get(msisdn) ?? new Map<string, number>();
    parts.set(part, (parts.get(part) ?? 0) + 1);
    this.received.set(msisdn, parts);
    this.stats.accepted++;

    const messageId = (this.nextMessage++).toString(16).padStart(10, '0');
    const outcome = simulatedOutcome(messageId, msisdn, this.options.behaviour, msisdn);
    const stored: StoredMessage = {
      messageId,
      systemId,
      msisdn,
      sourceAddr: submit.sourceAddr,
      status: outcome.status,
      errorCode: outcome.errorCode,
      submittedAt: Date.now(),
    };
    if (submit.registeredDelivery & 0x03) {
      setTimeout(() => this.queueReceipt(stored), outcome.latencyMs).unref();
    }

    let drop = false;
    if (this.dropNext > 0) {
      this.dropNext--;
      drop = true;
    }
    if (this.killAfter) {
      this.killAfter.submits--;
      if (this.killAfter.submits < this.killAfter.dropLast) drop = true;
      if (this.killAfter.submits <= 0) {
        this.killAfter = null;
        this.stats.killed++;
        setImmediate(() => connection.kill());
      }
    }
    if (drop) {
      this.stats.dropped++;
      return null;
    }
    return { commandStatus: 0, messageId };
  }

  private queueReceipt(message: StoredMessage): void {
    const queue = this.pending.get(message.systemId) ?? [];
    queue.push(message);
    this.pending.set(message.systemId, queue);
    this.stats.receiptsPending++;
    this.flushReceipts(message.systemId);
  }

  private flushReceipts(systemId: string): void {
    if (this.receiptsHeld) return;
    const queue = this.pending.get(systemId);
    if (!queue || queue.length === 0) return;
    const receivers = this.connections(systemId).filter((c) => c.bound?.mode !== 'transmitter' && c.isOpen);
    if (receivers.length === 0) return;
    const batch = queue.splice(0);
    batch.forEach((message, index) => {
      const connection = receivers[index % receivers.length]!;
      const receipt = RECEIPT_OF[message.status] ?? RECEIPT_OF.DELIVERED!;
      const err = (message.errorCode ?? '0').padStart(3, '0').slice(-3);
      const date = receiptDate(message.submittedAt);
      const text =
        `id:${message.messageId} sub:001 dlvrd:${message.status === 'DELIVERED' ? '001' : '000'} ` +
        `submit date:${date} done date:${receiptDate(Date.now())} stat:${receipt.stat} err:${/^\d+$/.test(err) ? err : '000'} text:`;
      connection
        .deliver({
          sourceAddr: message.msisdn,
          destinationAddr: message.sourceAddr,
          text,
          receiptedMessageId: message.messageId,
          messageState: receipt.state,
        })
        .then((status) => {
          if (status === 0) {
            this.stats.receiptsSent++;
            this.stats.receiptsPending--;
          } else {
            // Not taken (or the bind died): delivered again on the next bind.
            const retry = this.pending.get(systemId) ?? [];
            retry.push(message);
            this.pending.set(systemId, retry);
            setTimeout(() => this.flushReceipts(systemId), 500).unref();
          }
        });
    });
  }
}

export const SMPP_USAGE =
  'herald sms-simulator --smpp [--host <host>] [--port <port>] [--account <system_id>:<password>]… [--tps <n>] [--received-file <path>]';

/**
 * `herald sms-simulator --smpp`: the SMSC simulator as a process (no database, no broker), until
 * SIGTERM. Accounts come from `--account`, else from the gateway's own settings (each SMSC connection's
 * system_id and password), so a gateway and a simulator started with the same environment bind at once.
 * Prints `SMSC simulator listening on <host>:<port>` when ready. With `--received-file <path>`, each
 * SIGUSR2 (and the stop) writes what every number received so far, part by part, with the timing of the
 * submits since the previous write (`ReceivedReport`, JSON; a benchmark's per-run figures and its
 * exactly-once check), then prints `SMSC simulator: received written to <path>`.
 */
export async function smscSimulatorCommand(context: {
  argv: readonly string[];
  logger: Logger;
  signal: AbortSignal;
  behaviour: SmsSettings['simulator'];
  defaultAccounts: ReadonlyMap<string, string>;
}): Promise<number> {
  let host: string;
  let port: number;
  let tps: number | undefined;
  let receivedFile: string | undefined;
  const accounts = new Map<string, string>();
  try {
    const { values } = parse([...context.argv], {
      smpp: { type: 'boolean' },
      host: { type: 'string' },
      port: { type: 'string' },
      account: { type: 'string', multiple: true },
      tps: { type: 'string' },
      'received-file': { type: 'string' },
    } as const);
    receivedFile = values['received-file'];
    host = values.host ?? '127.0.0.1';
    port = values.port === undefined ? 2775 : Number(values.port);
    if (!Number.isInteger(port) || port < 0 || port > 65_535)
      throw new UsageError(`--port ${values.port}: not a port`);
    if (values.tps !== undefined) {
      tps = Number(values.tps);
      if (!(tps > 0)) throw new UsageError(`--tps ${values.tps}: not a positive number`);
    }
    for (const account of values.account ?? []) {
      const at = account.indexOf(':');
      if (at <= 0) throw new UsageError(`--account ${account}: expected <system_id>:<password>`);
      accounts.set(account.slice(0, at), account.slice(at + 1));
    }
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`herald: ${error.message}\nusage: ${SMPP_USAGE}\n`);
    return 2;
  }
  const simulator = await new SmscSimulator({
    host,
    port,
    accounts: accounts.size > 0 ? accounts : context.defaultAccounts,
    behaviour: context.behaviour,
    ...(tps !== undefined ? { tps } : {}),
    logger: context.logger,
  }).start();
  const writeReceived = () => {
    if (!receivedFile) return;
    writeFileSync(`${receivedFile}.tmp`, JSON.stringify(simulator.takePeriod()));
    renameSync(`${receivedFile}.tmp`, receivedFile);
    process.stdout.write(`SMSC simulator: received written to ${receivedFile}\n`);
  };
  if (receivedFile) process.on('SIGUSR2', writeReceived);
  process.stdout.write(`SMSC simulator listening on ${host}:${simulator.port}\n`);
  try {
    await new Promise<void>((resolve) => {
      if (context.signal.aborted) resolve();
      else context.signal.addEventListener('abort', () => resolve(), { once: true });
    });
  } finally {
    await simulator.close();
    if (receivedFile) {
      process.removeListener('SIGUSR2', writeReceived);
      writeReceived();
    }
    context.logger.info(
      { ...simulator.stats, numbers: simulator.numbersReached, duplicates: simulator.duplicates().length },
      'SMSC simulator stopped',
    );
  }
  return 0;
}
