/**
 * One SMPP 3.4 bind of the ESME side (`herald sms-gateway`, ADR 0022) on node-smpp: connect, bind
 * (transceiver, transmitter or receiver) with system_id / password / system_type, enquire_link keep-alive
 * (a link that does not answer within the response timeout is dead), submit_sm with its response or its
 * absence, deliver_sm handed to the caller and answered with deliver_sm_resp only once the caller's
 * promise resolved (after its commit: invariant 2 stays with the caller), the SMSC's enquire_link and
 * unbind answered, a clean unbind. Every outcome of a submit is a value, never a throw:
 * - `written: false` — the PDU never left (the socket was not writable): provably not sent;
 * - `response` — the SMSC's submit_sm_resp (command_status and message_id);
 * - `timeout` / `lost` — written, unanswered: the SMSC may or may not have taken it (invariant 9).
 * Connection and bind failures become TransientError here.
 */
import { randomUUID } from 'node:crypto';
import { errorMessage, TransientError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { FramedSession, type MalformedPdu, newPdu, SMPP_ERRORS } from './framed-session.js';
import type { SmppPdu } from './smpp-library.js';

export type BindMode = 'transceiver' | 'transmitter' | 'receiver';

export interface SmppBindOptions {
  host: string;
  port: number;
  tls?: boolean;
  systemId: string;
  password: string;
  systemType: string;
  mode: BindMode;
  /** enquire_link every this long while the bind is up. */
  enquireLinkMs: number;
  /** How long a submit_sm (or enquire_link, unbind) waits for its response. */
  responseTimeoutMs: number;
  /** Connect + bind must complete within this long. */
  connectTimeoutMs: number;
  logger: Logger;
  /** A name for logs (`<smsc>#<n>`). */
  name: string;
}

export interface SubmitRequest {
  serviceType: string;
  sourceAddr: string;
  sourceTon: number;
  sourceNpi: number;
  destinationAddr: string;
  destTon: number;
  destNpi: number;
  dataCoding: number;
  shortMessage: Uint8Array;
  udhIndicator: boolean;
  sar: { ref: number; total: number; seq: number } | null;
  registeredDelivery: number;
}

export type SubmitResult =
  | { readonly kind: 'response'; readonly commandStatus: number; readonly messageId: string | null }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'lost'; readonly reason: string };

export interface InboundDeliver {
  readonly sequenceNumber: number;
  readonly esmClass: number;
  readonly sourceAddr: string;
  readonly destinationAddr: string;
  /** The short message (or message_payload) as text. */
  readonly text: string;
  readonly receiptedMessageId: string | null;
  readonly messageState: number | null;
  readonly networkErrorCode: Uint8Array | null;
}

/** What the caller answers a deliver_sm with (deliver_sm_resp's command_status). */
export type DeliverHandler = (deliver: InboundDeliver) => Promise<number>;
export type MalformedHandler = (malformed: MalformedPdu) => Promise<void>;

interface Outstanding {
  resolve: (result: SubmitResult) => void;
  timer: NodeJS.Timeout;
}

function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('latin1');
  if (value && typeof value === 'object' && 'message' in value)
    return textOf((value as { message: unknown }).message);
  return '';
}

export class SmppBind {
  readonly id = randomUUID().slice(0, 8);
  private readonly outstanding = new Map<number, Outstanding>();
  private closedReason: string | undefined;
  private readonly closedWaiters: ((reason: string) => void)[] = [];
  private enquireTimer: NodeJS.Timeout | undefined;
  private deliverHandler: DeliverHandler = async () => 0;
  private malformedHandler: MalformedHandler = async () => {};
  private readonly log: Logger;

  private constructor(
    private readonly session: FramedSession,
    readonly options: SmppBindOptions,
  ) {
    this.log = options.logger.child({ bind: options.name, bindId: this.id });
  }

  /** Connects and binds; resolves with a bound session, or throws TransientError (nothing is left open). */
  static async open(options: SmppBindOptions): Promise<SmppBind> {
    const session = new FramedSession({ host: options.host, port: options.port, tls: options.tls ?? false });
    const bind = new SmppBind(session, options);
    try {
      await bind.connectAndBind();
    } catch (error) {
      session.destroy();
      throw error;
    }
    bind.wire();
    return bind;
  }

  get closed(): boolean {
    return this.closedReason !== undefined;
  }

  /** Submits written and not answered yet. */
  get inFlight(): number {
    return this.outstanding.size;
  }

  /** Resolves with the reason once the bind is gone (at once when it already is). */
  whenClosed(): Promise<string> {
    if (this.closedReason !== undefined) return Promise.resolve(this.closedReason);
    return new Promise((resolve) => this.closedWaiters.push(resolve));
  }

  onDeliver(handler: DeliverHandler): void {
    this.deliverHandler = handler;
  }

  onMalformed(handler: MalformedHandler): void {
    this.malformedHandler = handler;
  }

  private connectAndBind(): Promise<void> {
    const { options, session } = this;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => fail(new TransientError(`SMPP bind to ${options.host}:${options.port} timed out`)),
        options.connectTimeoutMs,
      );
      const fail = (error: Error) => {
        clearTimeout(timer);
        session.removeListener('error', onError);
        session.removeListener('close', onClose);
        reject(error);
      };
      const onError = (error: Error) =>
        fail(
          new TransientError(
            `SMPP connection to ${options.host}:${options.port} failed: ${error.message}`,
            {},
            error,
          ),
        );
      const onClose = () =>
        fail(new TransientError(`SMPP connection to ${options.host}:${options.port} closed before the bind`));
      session.once('error', onError);
      session.once('close', onClose);
      session.once(options.tls ? 'secureConnect' : 'connect', () => {
        const pdu = newPdu(`bind_${options.mode}`, {
          system_id: options.systemId,
          password: options.password,
          system_type: options.systemType,
          interface_version: 0x34,
        });
        session.send(pdu, (resp: SmppPdu) => {
          if (resp.command_status !== 0) {
            fail(
              new TransientError(
                `SMPP bind_${options.mode} as ${options.systemId} refused: command_status 0x${resp.command_status.toString(16)}`,
                { commandStatus: resp.command_status },
              ),
            );
            return;
          }
          clearTimeout(timer);
          session.removeListener('error', onError);
          session.removeListener('close', onClose);
          resolve();
        });
      });
    });
  }

  private wire(): void {
    const { session, options } = this;
    session.on('error', (error: Error) => this.log.warn({ err: error }, 'smpp session error'));
    session.on('close', () => this.closeWith(this.closedReason ?? 'connection closed by the peer'));
    session.on('enquire_link', (pdu: SmppPdu) => session.send(pdu.response()));
    session.on('unbind', (pdu: SmppPdu) => {
      session.send(pdu.response());
      this.closeWith('unbound by the SMSC');
      session.close();
    });
    session.on('generic_nack', (pdu: SmppPdu) => {
      this.log.warn({ sequence: pdu.sequence_number, status: pdu.command_status }, 'smpp generic_nack');
      const waiting = this.outstanding.get(pdu.sequence_number);
      if (waiting)
        this.settle(pdu.sequence_number, {
          kind: 'response',
          commandStatus: pdu.command_status || SMPP_ERRORS.ESME_RSYSERR!,
          messageId: null,
        });
    });
    session.on('deliver_sm', (pdu: SmppPdu) => this.handleDeliver(pdu));
    session.on('malformed', (malformed: MalformedPdu) => {
      this.log.warn(
        { commandId: malformed.commandId, sequence: malformed.sequenceNumber, reason: malformed.reason },
        'malformed PDU from the SMSC',
      );
      this.malformedHandler(malformed).then(
        () => {
          if (malformed.sequenceNumber !== 0 && !this.closed) {
            session.send(
              newPdu('generic_nack', {
                sequence_number: malformed.sequenceNumber,
                command_status: SMPP_ERRORS.ESME_RINVCMDLEN,
              }),
            );
          }
        },
        (error: unknown) => this.log.error({ err: error }, 'malformed PDU not recorded; left unanswered'),
      );
    });
    this.enquireTimer = setInterval(() => this.enquireLink(), options.enquireLinkMs);
    this.enquireTimer.unref();
  }

  private enquireLink(): void {
    if (this.closed) return;
    const timer = setTimeout(() => this.destroy('enquire_link not answered'), this.options.responseTimeoutMs);
    const sent = this.session.send(newPdu('enquire_link'), () => clearTimeout(timer));
    if (!sent) {
      clearTimeout(timer);
      this.destroy('socket not writable');
    }
  }

  private handleDeliver(pdu: SmppPdu): void {
    const deliver: InboundDeliver = {
      sequenceNumber: pdu.sequence_number,
      esmClass: Number(pdu.esm_class ?? 0),
      sourceAddr: String(pdu.source_addr ?? ''),
      destinationAddr: String(pdu.destination_addr ?? ''),
      text: textOf(pdu.short_message) || textOf(pdu.message_payload),
      receiptedMessageId: typeof pdu.receipted_message_id === 'string' ? pdu.receipted_message_id : null,
      messageState: typeof pdu.message_state === 'number' ? pdu.message_state : null,
      networkErrorCode: Buffer.isBuffer(pdu.network_error_code) ? pdu.network_error_code : null,
    };
    this.deliverHandler(deliver).then(
      (status) => {
        if (!this.closed) this.session.send(pdu.response({ command_status: status }));
      },
      (error: unknown) => {
        // Not recorded: a temporary application error, so the SMSC delivers it again later.
        this.log.warn(
          { err: error, sequence: pdu.sequence_number },
          'deliver_sm not recorded; answered ESME_RX_T_APPN',
        );
        if (!this.closed) this.session.send(pdu.response({ command_status: SMPP_ERRORS.ESME_RX_T_APPN }));
      },
    );
  }

  /** Writes one submit_sm. `written: false` proves it never left; otherwise `response` says what came back. */
  submit(request: SubmitRequest): { written: boolean; response: Promise<SubmitResult> } {
    if (this.closed)
      return { written: false, response: Promise.resolve({ kind: 'lost', reason: this.closedReason! }) };
    const options: Record<string, unknown> = {
      service_type: request.serviceType,
      source_addr_ton: request.sourceTon,
      source_addr_npi: request.sourceNpi,
      source_addr: request.sourceAddr,
      dest_addr_ton: request.destTon,
      dest_addr_npi: request.destNpi,
      destination_addr: request.destinationAddr,
      esm_class: request.udhIndicator ? 0x40 : 0,
      registered_delivery: request.registeredDelivery,
      data_coding: request.dataCoding,
      short_message: Buffer.from(request.shortMessage),
    };
    if (request.sar) {
      options.sar_msg_ref_num = request.sar.ref;
      options.sar_total_segments = request.sar.total;
      options.sar_segment_seqnum = request.sar.seq;
    }
    const pdu = newPdu('submit_sm', options);
    let resolve!: (result: SubmitResult) => void;
    const response = new Promise<SubmitResult>((r) => (resolve = r));
    let sequence = 0;
    const written = this.session.send(pdu, (resp: SmppPdu) =>
      this.settle(resp.sequence_number, {
        kind: 'response',
        commandStatus: resp.command_status,
        messageId: typeof resp.message_id === 'string' && resp.message_id !== '' ? resp.message_id : null,
      }),
    );
    if (!written)
      return { written: false, response: Promise.resolve({ kind: 'lost', reason: 'socket not writable' }) };
    sequence = pdu.sequence_number;
    const timer = setTimeout(
      () => this.settle(sequence, { kind: 'timeout' }),
      this.options.responseTimeoutMs,
    );
    this.outstanding.set(sequence, { resolve, timer });
    return { written: true, response };
  }

  private settle(sequence: number, result: SubmitResult): void {
    const waiting = this.outstanding.get(sequence);
    if (!waiting) {
      if (result.kind === 'response')
        this.log.warn({ sequence }, 'submit_sm_resp after its timeout: ignored');
      return;
    }
    this.outstanding.delete(sequence);
    clearTimeout(waiting.timer);
    waiting.resolve(result);
  }

  private closeWith(reason: string): void {
    if (this.enquireTimer) clearInterval(this.enquireTimer);
    if (this.closedReason === undefined) {
      this.closedReason = reason;
      this.log.info({ reason, outstanding: this.outstanding.size }, 'smpp bind closed');
    }
    for (const sequence of [...this.outstanding.keys()]) this.settle(sequence, { kind: 'lost', reason });
    for (const waiter of this.closedWaiters.splice(0)) waiter(this.closedReason);
  }

  /** Clean unbind: unbind, its response (or the timeout), then close the socket. */
  async unbind(): Promise<void> {
    if (this.closed) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.options.responseTimeoutMs);
      const sent = this.session.send(newPdu('unbind'), () => {
        clearTimeout(timer);
        resolve();
      });
      if (!sent) {
        clearTimeout(timer);
        resolve();
      }
    });
    this.closeWith('unbound');
    await new Promise<void>((resolve) => {
      this.session.close(() => resolve());
      setTimeout(() => {
        this.session.destroy();
        resolve();
      }, 1_000).unref();
    });
  }

  /** Drops the connection at once; unanswered submits become `lost`. */
  destroy(reason: string): void {
    this.closeWith(reason);
    try {
      this.session.destroy();
    } catch (error) {
      this.log.debug({ err: errorMessage(error) }, 'destroy');
    }
  }
}
