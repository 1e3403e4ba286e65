/**
 * One SMSC connection of `herald sms-gateway` (ADR 0022): its binds (transceivers, or transmitters plus
 * receivers), each kept up with enquire_link and re-bound with backoff, and each transmitting bind's send
 * loop. The loop keeps at most `window` submit_sm unanswered, paces them at the bind's and the route's
 * TPS, and slows down on ESME_RTHROTTLED (pause, doubling; rate halved, then recovered). Invariant 9: a
 * window of parts is marked `sending` in ONE transaction that commits BEFORE any of their PDUs is written;
 * answers are recorded in batches (accepted with the SMSC's message id — stored before that id's receipt
 * can be matched —, throttled or retryable back to `queued`, permanent `failed`, unanswered
 * `unconfirmed`), and the recipients they decide are reported in the same transaction. Receipts
 * (deliver_sm) are recorded after the bind's pending answers, in batches, and each is answered
 * (deliver_sm_resp) only after its transaction committed.
 */
import { randomInt } from 'node:crypto';
import {
  claimParts,
  insertReceipts,
  matchReceipts,
  type PartResponse,
  recordResponses,
} from '../../../../adapters/postgres/sms-gateway-queries.js';
import type { MalformedPdu } from '../../../../adapters/smpp/framed-session.js';
import {
  type BindMode,
  type InboundDeliver,
  SmppBind,
  type SubmitResult,
} from '../../../../adapters/smpp/smpp-client.js';
import { concatReference, smppParts } from '../../../../domain/sms/smpp-message.js';
import { classifySubmitStatus, hexStatus, parseReceipt } from '../../../../domain/sms/smpp-outcome.js';
import { errorMessage } from '../../../../errors.js';
import type { Logger } from '../../../../logger.js';
import { heraldMetrics } from '../../../../observability/metrics.js';
import type { Database } from '../../../../ports/database.js';
import type { SmsSettings } from '../settings.js';
import { reportRecipients } from './reports.js';
import type { SmscSettings, SmsGatewaySettings } from './settings.js';

/** Time for pacing and throttle pauses (tests inject one whose sleep advances it). */
export interface GatewayClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const realClock: GatewayClock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/** Evenly spaced send slots at a rate: reserve n, give back what was not used. */
export class Pacer {
  private next = 0;
  constructor(
    public tps: number,
    private readonly clock: GatewayClock,
  ) {}

  /** Reserves n slots; resolves when the first may go. */
  reserve(n: number): number {
    const now = this.clock.now();
    const start = Math.max(this.next, now);
    this.next = start + (n * 1000) / this.tps;
    return start - now;
  }

  giveBack(n: number): void {
    this.next = Math.max(this.clock.now(), this.next - (n * 1000) / this.tps);
  }
}

export interface SmscStats {
  binds: number;
  bindFailures: number;
  submitted: number;
  accepted: number;
  throttled: number;
  retried: number;
  failed: number;
  unconfirmed: number;
  notWritten: number;
  withdrawn: number;
  receipts: number;
  malformed: number;
  reports: number;
}

export interface SmscConnectionDeps {
  db: Database;
  smsc: SmscSettings;
  gateway: SmsGatewaySettings;
  sms: Pick<SmsSettings, 'sink' | 'dlrTopic'>;
  logger: Logger;
  pod: string;
  clock?: GatewayClock;
  /** Wakes the relay after a transaction that wrote outbox rows. */
  outboxWritten?: () => void;
}

interface Waiter {
  resolve: () => void;
}

/** A pending receipt (or malformed deliver_sm) waiting for its batch's commit. */
interface PendingReceipt {
  record: Parameters<typeof insertReceipts>[1][number];
  done: (status: number) => void;
  failed: (error: unknown) => void;
}

export class SmscConnection {
  readonly stats: SmscStats = {
    binds: 0,
    bindFailures: 0,
    submitted: 0,
    accepted: 0,
    throttled: 0,
    retried: 0,
    failed: 0,
    unconfirmed: 0,
    notWritten: 0,
    withdrawn: 0,
    receipts: 0,
    malformed: 0,
    reports: 0,
  };
  private readonly clock: GatewayClock;
  private readonly routePacer: Pacer;
  private readonly abort = new AbortController();
  private readonly workers: BindWorker[] = [];
  private running: Promise<void>[] = [];
  private idle = new Set<Waiter>();
  readonly log: Logger;

  constructor(readonly deps: SmscConnectionDeps) {
    this.clock = deps.clock ?? realClock;
    this.routePacer = new Pacer(deps.smsc.tps, this.clock);
    this.log = deps.logger.child({ smsc: deps.smsc.name });
  }

  get name(): string {
    return this.deps.smsc.name;
  }

  /** Binds currently up, by mode. */
  get bindsUp(): { transmit: number; receive: number } {
    let transmit = 0;
    let receive = 0;
    for (const w of this.workers) {
      if (!w.up) continue;
      if (w.mode !== 'receiver') transmit++;
      if (w.mode !== 'transmitter') receive++;
    }
    return { transmit, receive };
  }

  start(): void {
    const { binds } = this.deps.smsc;
    const modes: BindMode[] = [
      ...Array<BindMode>(binds.transceivers).fill('transceiver'),
      ...Array<BindMode>(binds.transmitters).fill('transmitter'),
      ...Array<BindMode>(binds.receivers).fill('receiver'),
    ];
    modes.forEach((mode, index) => {
      const worker = new BindWorker(this, mode, index + 1, this.clock, this.routePacer, this.abort.signal);
      this.workers.push(worker);
    });
    this.running = this.workers.map((w) => w.run());
  }

  /** New parts were queued for this SMSC (in this process): idle binds look at once. */
  wake(): void {
    for (const waiter of this.idle) waiter.resolve();
    this.idle.clear();
  }

  /** Waits until woken, the poll interval passes, or the connection stops. */
  idleWait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiter: Waiter = {
        resolve: () => {
          clearTimeout(timer);
          this.abort.signal.removeEventListener('abort', waiter.resolve);
          this.idle.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.resolve, ms);
      this.abort.signal.addEventListener('abort', waiter.resolve, { once: true });
      this.idle.add(waiter);
    });
  }

  /** Graceful stop: no new windows; outstanding answers waited for (response timeout), recorded; unbind. */
  async stop(): Promise<void> {
    this.abort.abort();
    this.wake();
    await Promise.allSettled(this.running);
  }

  /** Kills every bind at once (tests: a lost connection). */
  dropBinds(): void {
    for (const w of this.workers) w.drop('dropped by the gateway');
  }
}

/** One bind slot: connect, bind, send (if it transmits), re-bind after a loss. */
class BindWorker {
  private bind: SmppBind | undefined;
  private owner = '';
  private readonly pacer: Pacer;
  private readonly configuredTps: number;
  private pausedUntil = 0;
  private throttleBackoff: number;
  private lastThrottleAt = 0;
  private responses: PartResponse[] = [];
  private responseFlush: Promise<void> = Promise.resolve();
  private flushScheduled = false;
  private receipts: PendingReceipt[] = [];
  private receiptFlushScheduled = false;
  private responseWaiters: (() => void)[] = [];
  private readonly log: Logger;
  private readonly name: string;

  constructor(
    private readonly connection: SmscConnection,
    readonly mode: BindMode,
    index: number,
    private readonly clock: GatewayClock,
    private readonly routePacer: Pacer,
    private readonly signal: AbortSignal,
  ) {
    const { smsc, gateway } = connection.deps;
    this.name = `${smsc.name}#${index}`;
    this.configuredTps = smsc.tpsPerBind;
    this.pacer = new Pacer(smsc.tpsPerBind, clock);
    this.throttleBackoff = gateway.throttleBackoffMs;
    this.log = connection.log.child({ bind: this.name, mode });
  }

  get up(): boolean {
    return this.bind !== undefined && !this.bind.closed;
  }

  drop(reason: string): void {
    this.bind?.destroy(reason);
  }

  async run(): Promise<void> {
    const { deps } = this.connection;
    let backoff = deps.gateway.reconnectMinMs;
    while (!this.signal.aborted) {
      let bind: SmppBind;
      try {
        bind = await SmppBind.open({
          host: deps.smsc.host,
          port: deps.smsc.port,
          tls: deps.smsc.tls,
          systemId: deps.smsc.systemId,
          password: deps.smsc.password,
          systemType: deps.smsc.systemType,
          mode: this.mode,
          enquireLinkMs: deps.gateway.enquireLinkMs,
          responseTimeoutMs: deps.gateway.responseTimeoutMs,
          connectTimeoutMs: deps.gateway.connectTimeoutMs,
          logger: this.log,
          name: this.name,
        });
      } catch (error) {
        this.connection.stats.bindFailures++;
        const wait = Math.min(backoff, deps.gateway.reconnectMaxMs);
        this.log.warn({ err: errorMessage(error), retryInMs: wait }, 'smpp bind failed; retrying');
        await this.realSleep(wait + randomInt(0, Math.max(1, Math.floor(wait / 4))));
        backoff = Math.min(backoff * 2, deps.gateway.reconnectMaxMs);
        continue;
      }
      backoff = deps.gateway.reconnectMinMs;
      this.bind = bind;
      this.owner = `${deps.pod}:${this.name}:${bind.id}`;
      this.connection.stats.binds++;
      this.log.info({ owner: this.owner }, 'smpp bound');
      heraldMetrics.smsGateway(deps.smsc.name).bind(this.mode, 1);
      void bind.whenClosed().then(() => heraldMetrics.smsGateway(deps.smsc.name).bind(this.mode, -1));
      bind.onDeliver((deliver) => this.onDeliver(deliver));
      bind.onMalformed((malformed) => this.onMalformed(malformed));
      const closed = bind.whenClosed();
      if (this.mode !== 'receiver') await this.sendLoop(bind);
      else
        await Promise.race([
          closed,
          new Promise<void>((r) => this.signal.addEventListener('abort', () => r(), { once: true })),
        ]);
      if (this.signal.aborted && !bind.closed) {
        await this.waitForAnswers(bind);
        await this.flushResponses();
        await this.flushReceipts();
        await bind.unbind();
      }
      await this.flushResponses();
      await this.flushReceipts();
      if (!this.signal.aborted) {
        const reason = await closed;
        this.log.warn({ reason }, 'smpp bind lost; re-binding');
        await this.realSleep(deps.gateway.reconnectMinMs);
      }
    }
  }

  private realSleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Waits (up to the response timeout) until every written submit is answered or given up. */
  private async waitForAnswers(bind: SmppBind): Promise<void> {
    const deadline = Date.now() + this.connection.deps.gateway.responseTimeoutMs + 1_000;
    while (bind.inFlight > 0 && !bind.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        this.responseWaiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }

  private async sendLoop(bind: SmppBind): Promise<void> {
    const { deps } = this.connection;
    const window = deps.smsc.window;
    while (!this.signal.aborted && !bind.closed) {
      const free = window - bind.inFlight;
      // Refill the window by halves: claiming one part per answer would cost a transaction per part.
      if (free <= 0 || (bind.inFlight > 0 && free < Math.ceil(window / 2))) {
        await new Promise<void>((resolve) => {
          this.responseWaiters.push(resolve);
          setTimeout(resolve, 50);
        });
        continue;
      }
      const pause = this.pausedUntil - this.clock.now();
      if (pause > 0) {
        await this.clock.sleep(pause);
        continue;
      }
      this.recoverRate();
      const n = free;
      const wait = Math.max(this.pacer.reserve(n), this.routePacer.reserve(n));
      if (wait > 0) await this.clock.sleep(wait);
      if (this.signal.aborted || bind.closed) {
        this.pacer.giveBack(n);
        this.routePacer.giveBack(n);
        break;
      }
      let claimed: Awaited<ReturnType<typeof claimParts>>;
      try {
        claimed = await deps.db.transaction(async (tx) => {
          const result = await claimParts(tx, { smsc: deps.smsc.name, owner: this.owner, limit: n });
          if (result.withdrawn.length > 0) {
            const reports = await reportRecipients(tx, result.withdrawn, {
              settings: deps.sms,
              cause: 'withdrawn at claim',
              smsc: deps.smsc.name,
            });
            this.connection.stats.reports += reports.length;
          }
          return result;
        });
      } catch (error) {
        this.pacer.giveBack(n);
        this.routePacer.giveBack(n);
        this.log.warn({ err: errorMessage(error) }, 'cannot claim parts; retrying');
        await this.connection.idleWait(deps.gateway.pollMs);
        continue;
      }
      if (claimed.withdrawn.length > 0) {
        this.connection.stats.withdrawn += claimed.withdrawn.length;
        deps.outboxWritten?.();
        this.log.info(
          { withdrawn: claimed.withdrawn.length },
          'parts withdrawn unsent (campaign stopped sending or recipient ended)',
        );
      }
      const unused = n - claimed.send.length;
      if (unused > 0) {
        this.pacer.giveBack(unused);
        this.routePacer.giveBack(unused);
      }
      if (claimed.send.length === 0) {
        if (claimed.withdrawn.length === 0) await this.connection.idleWait(deps.gateway.pollMs);
        continue;
      }
      for (const part of claimed.send) this.write(bind, part);
    }
  }

  private write(bind: SmppBind, part: Awaited<ReturnType<typeof claimParts>>['send'][number]): void {
    const { smsc } = this.connection.deps;
    const pieces = smppParts(part.content, part.encoding, {
      concatenation: smsc.concatenation,
      reference: concatReference(part.submissionId, part.recipientId),
    });
    const piece = pieces[part.partNo - 1];
    if (!piece || pieces.length !== part.parts) {
      // Cannot happen for a part split by the consumer from the same content; recorded as a failure.
      this.record({
        id: part.id,
        state: 'failed',
        smscMessageId: null,
        commandStatus: 0x000000ff,
        delayMs: 0,
        throttled: false,
        resubmitted: false,
      });
      return;
    }
    const alphanumeric = /[^0-9+]/.test(part.sender);
    const { written, response } = bind.submit({
      serviceType: smsc.serviceType,
      sourceAddr: part.sender,
      sourceTon: smsc.sourceTon ?? (alphanumeric ? 5 : 1),
      sourceNpi: smsc.sourceNpi ?? (alphanumeric ? 0 : 1),
      destinationAddr: part.msisdn.replace(/^\+/, ''),
      destTon: smsc.destTon,
      destNpi: smsc.destNpi,
      dataCoding: piece.dataCoding,
      shortMessage: piece.shortMessage,
      udhIndicator: piece.udhIndicator,
      sar: piece.sar,
      registeredDelivery: 1,
    });
    if (!written) {
      // Provably never sent (the socket was not writable): back to the queue, nothing counted.
      this.connection.stats.notWritten++;
      heraldMetrics.smsGateway(smsc.name).submit('not_written');
      this.record({
        id: part.id,
        state: 'queued',
        smscMessageId: null,
        commandStatus: null,
        delayMs: 0,
        throttled: false,
        resubmitted: false,
      });
      return;
    }
    this.connection.stats.submitted++;
    response.then((result) => this.answered(part.id, result));
  }

  private answered(partId: string, result: SubmitResult): void {
    const { gateway } = this.connection.deps;
    const smscName = this.connection.deps.smsc.name;
    const stats = this.connection.stats;
    for (const waiter of this.responseWaiters.splice(0)) waiter();
    if (result.kind !== 'response') {
      stats.unconfirmed++;
      heraldMetrics.smsGateway(smscName).submit('unconfirmed');
      this.log.warn(
        {
          partId,
          outcome: result.kind,
          reason: result.kind === 'lost' ? result.reason : 'no submit_sm_resp',
        },
        'submit_sm unanswered: UNCONFIRMED, never resent',
      );
      this.record({
        id: partId,
        state: 'unconfirmed',
        smscMessageId: null,
        commandStatus: null,
        delayMs: 0,
        throttled: false,
        resubmitted: false,
      });
      return;
    }
    const kind = classifySubmitStatus(result.commandStatus);
    switch (kind) {
      case 'accepted':
        stats.accepted++;
        heraldMetrics.smsGateway(smscName).submit('accepted');
        this.record({
          id: partId,
          state: 'accepted',
          smscMessageId: result.messageId,
          commandStatus: 0,
          delayMs: 0,
          throttled: false,
          resubmitted: false,
        });
        return;
      case 'throttled':
        stats.throttled++;
        heraldMetrics.smsGateway(smscName).submit('throttled');
        this.throttled();
        // The SMSC refused it: the same part goes again once the bind's pause is over. Never failed.
        this.record({
          id: partId,
          state: 'queued',
          smscMessageId: null,
          commandStatus: result.commandStatus,
          delayMs: 0,
          throttled: true,
          resubmitted: false,
        });
        return;
      case 'retryable':
        stats.retried++;
        heraldMetrics.smsGateway(smscName).submit('retryable');
        this.record({
          id: partId,
          state: 'queued',
          smscMessageId: null,
          commandStatus: result.commandStatus,
          delayMs: gateway.resubmitDelayMs,
          throttled: false,
          resubmitted: true,
        });
        return;
      case 'permanent':
        stats.failed++;
        heraldMetrics.smsGateway(smscName).submit('permanent');
        this.log.warn(
          { partId, commandStatus: hexStatus(result.commandStatus) },
          'submit_sm refused permanently',
        );
        this.record({
          id: partId,
          state: 'failed',
          smscMessageId: null,
          commandStatus: result.commandStatus,
          delayMs: 0,
          throttled: false,
          resubmitted: false,
        });
        return;
      default:
        assertNever(kind);
    }
  }

  /** ESME_RTHROTTLED: pause the bind (doubling while it goes on) and halve its rate. */
  private throttled(): void {
    const { gateway } = this.connection.deps;
    const now = this.clock.now();
    if (now < this.pausedUntil) return; // one slow-down per pause, however many answers say so
    this.throttleBackoff =
      now - this.lastThrottleAt < this.throttleBackoff * 2 + 1_000
        ? Math.min(this.throttleBackoff * 2, gateway.throttleMaxBackoffMs)
        : gateway.throttleBackoffMs;
    this.lastThrottleAt = now;
    this.pausedUntil = now + this.throttleBackoff;
    this.pacer.tps = Math.max(1, this.pacer.tps / 2);
    this.log.warn(
      { pauseMs: this.throttleBackoff, tps: this.pacer.tps },
      'ESME_RTHROTTLED: bind slowed down',
    );
  }

  /** Back towards the configured rate after a quiet spell (5 s without throttling). */
  private recoverRate(): void {
    if (this.pacer.tps >= this.configuredTps) return;
    if (this.clock.now() - this.lastThrottleAt < 5_000) return;
    this.pacer.tps = Math.min(this.configuredTps, this.pacer.tps * 1.5);
    this.lastThrottleAt = this.clock.now() - 4_000; // the next step after another second
  }

  /** Queues one answer for the next batch. */
  private record(response: PartResponse): void {
    this.responses.push(response);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setTimeout(
      () => {
        this.flushScheduled = false;
        void this.flushResponses();
      },
      this.responses.length >= 200 ? 0 : 5,
    );
  }

  /** Records every queued answer (one transaction per batch, one batch at a time per bind). */
  flushResponses(): Promise<void> {
    this.responseFlush = this.responseFlush.then(async () => {
      while (this.responses.length > 0) {
        const batch = this.responses.splice(0, 1_000);
        try {
          await this.recordBatch(batch);
        } catch (error) {
          this.log.warn(
            { err: errorMessage(error), answers: batch.length },
            'cannot record answers; retrying',
          );
          this.responses.unshift(...batch);
          await new Promise((resolve) => setTimeout(resolve, 500));
          if (this.signal.aborted && this.bind?.closed) {
            // Stopping with the database away: the unconfirmed sweep of a later gateway takes them.
            return;
          }
        }
      }
    });
    return this.responseFlush;
  }

  private async recordBatch(batch: PartResponse[]): Promise<void> {
    const { deps } = this.connection;
    const reports = await deps.db.transaction(async (tx) => {
      const changed = await recordResponses(tx, this.owner, batch);
      const accepted = changed.filter((c) => c.state === 'accepted').map((c) => c.id);
      // Receipts that came before their answer was recorded (on another bind) are matched now.
      const receipted = await matchReceipts(tx, 'parts', accepted);
      const decided = [
        ...changed.filter((c) => c.state === 'failed' || c.state === 'unconfirmed'),
        ...receipted,
      ];
      return reportRecipients(tx, decided, { settings: deps.sms, cause: 'responses', smsc: deps.smsc.name });
    });
    if (reports.length > 0) {
      this.connection.stats.reports += reports.length;
      deps.outboxWritten?.();
    }
  }

  private onDeliver(deliver: InboundDeliver): Promise<number> {
    const { smsc } = this.connection.deps;
    const isReceipt = (deliver.esmClass & 0x3c) === 0x04 || deliver.receiptedMessageId !== null;
    const parsed = isReceipt
      ? parseReceipt({
          text: deliver.text,
          receiptedMessageId: deliver.receiptedMessageId,
          messageState: deliver.messageState,
          networkErrorCode: deliver.networkErrorCode,
        })
      : ({
          ok: false,
          reason: 'not a delivery receipt (a mobile-originated message): not handled',
          messageId: null,
        } as const);
    const raw = JSON.stringify({
      esmClass: deliver.esmClass,
      source: deliver.sourceAddr,
      destination: deliver.destinationAddr,
      text: deliver.text.slice(0, 500),
      receiptedMessageId: deliver.receiptedMessageId,
      messageState: deliver.messageState,
    });
    if (!parsed.ok) {
      this.connection.stats.malformed++;
      heraldMetrics.smsGateway(smsc.name).receipt('not_understood');
      this.log.warn(
        { reason: parsed.reason, sequence: deliver.sequenceNumber },
        'deliver_sm not understood: recorded',
      );
    }
    return new Promise((done, failed) => {
      this.receipts.push({
        record: {
          smsc: smsc.name,
          smscMessageId: parsed.messageId,
          outcome: parsed.ok ? parsed.outcome : null,
          errorCode: parsed.ok ? parsed.errorCode : null,
          final: parsed.ok && parsed.outcome !== null,
          problem: parsed.ok ? null : parsed.reason,
          raw,
        },
        done,
        failed,
      });
      this.scheduleReceipts();
    });
  }

  private onMalformed(malformed: MalformedPdu): Promise<void> {
    this.connection.stats.malformed++;
    heraldMetrics.smsGateway(this.connection.deps.smsc.name).receipt('malformed_pdu');
    return new Promise((done, failed) => {
      this.receipts.push({
        record: {
          smsc: this.connection.deps.smsc.name,
          smscMessageId: null,
          outcome: null,
          errorCode: null,
          final: false,
          problem: `malformed PDU (command 0x${malformed.commandId.toString(16)}): ${malformed.reason}`,
          raw: malformed.raw.toString('hex'),
        },
        done: () => done(),
        failed,
      });
      this.scheduleReceipts();
    });
  }

  private scheduleReceipts(): void {
    if (this.receiptFlushScheduled) return;
    this.receiptFlushScheduled = true;
    setTimeout(() => {
      this.receiptFlushScheduled = false;
      void this.flushReceipts();
    }, 5);
  }

  /** Records pending receipts after this bind's pending answers; answers each after the commit. */
  private async flushReceipts(): Promise<void> {
    while (this.receipts.length > 0) {
      // A receipt for a part this bind sent is matched only once the part's answer is recorded.
      await this.flushResponses();
      const batch = this.receipts.splice(0, 1_000);
      const { deps } = this.connection;
      try {
        const reports = await deps.db.transaction(async (tx) => {
          const ids = await insertReceipts(
            tx,
            batch.map((b) => b.record),
          );
          const matched = await matchReceipts(tx, 'receipts', ids);
          return reportRecipients(tx, matched, {
            settings: deps.sms,
            cause: 'receipts',
            smsc: deps.smsc.name,
          });
        });
        this.connection.stats.receipts += batch.length;
        heraldMetrics
          .smsGateway(deps.smsc.name)
          .receipt('receipt', batch.filter((b) => b.record.problem === null).length);
        this.connection.stats.reports += reports.length;
        if (reports.length > 0) deps.outboxWritten?.();
        for (const b of batch) b.done(0);
      } catch (error) {
        this.log.warn(
          { err: errorMessage(error), receipts: batch.length },
          'cannot record receipts; the SMSC will send them again',
        );
        for (const b of batch) b.failed(error);
      }
    }
  }
}

function assertNever(value: never): never {
  throw new Error(`unexpected ${String(value)}`);
}
