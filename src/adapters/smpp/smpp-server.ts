/**
 * The SMSC side of SMPP 3.4 on node-smpp's sessions, for `herald sms-simulator --smpp` and the test
 * fixture (ADR 0022): a TCP listener whose connections are framed sessions (framed-session.ts). The
 * caller decides every answer: a bind (authenticated by system_id and password), each submit_sm (a
 * response, or none: a dropped response), and sends deliver_sm receipts, may kill a connection or write
 * raw bytes. enquire_link and unbind are answered here; a PDU that does not decode is answered with a
 * generic_nack (ESME_RINVCMDLEN) and counted; an unknown command with generic_nack (ESME_RINVCMDID).
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../../logger.js';
import { FramedSession, type MalformedPdu, newPdu, SMPP_ERRORS } from './framed-session.js';
import type { BindMode } from './smpp-client.js';
import type { SmppPdu } from './smpp-library.js';

export interface InboundSubmit {
  readonly sequenceNumber: number;
  readonly serviceType: string;
  readonly sourceAddr: string;
  readonly sourceTon: number;
  readonly sourceNpi: number;
  readonly destinationAddr: string;
  readonly destTon: number;
  readonly destNpi: number;
  readonly esmClass: number;
  readonly registeredDelivery: number;
  readonly dataCoding: number;
  /** The short message's UDH information elements (as node-smpp decodes them), if any. */
  readonly udh: readonly Uint8Array[];
  /** The text, decoded by data_coding (after any UDH). */
  readonly text: string;
  readonly sar: { ref?: number; total?: number; seq?: number };
}

/** A submit's answer: a response, or `null` for none at all (a dropped response). */
export type SubmitAnswer = { commandStatus: number; messageId: string } | null;

export interface ServerConnectionHandlers {
  /** Decides a bind: 0 (ESME_ROK) or an error status (the connection is then closed). */
  onBind(bind: { mode: BindMode; systemId: string; password: string; systemType: string }): number;
  onSubmit(connection: SmppServerConnection, submit: InboundSubmit): Promise<SubmitAnswer> | SubmitAnswer;
  onMalformed?(connection: SmppServerConnection, malformed: MalformedPdu): void;
  /** The ESME unbound cleanly (before closing). */
  onUnbind?(connection: SmppServerConnection): void;
  onClose?(connection: SmppServerConnection): void;
}

export interface OutboundReceipt {
  sourceAddr: string;
  destinationAddr: string;
  text: string;
  receiptedMessageId?: string;
  messageState?: number;
}

let nextConnection = 1;

export class SmppServerConnection {
  readonly id = nextConnection++;
  bound: { mode: BindMode; systemId: string } | null = null;
  private closed = false;

  constructor(
    private readonly session: FramedSession,
    readonly socket: Socket,
  ) {
    session.on('close', () => {
      this.closed = true;
    });
  }

  get isOpen(): boolean {
    return !this.closed && this.socket.writable;
  }

  /** Sends a deliver_sm receipt; resolves with the deliver_sm_resp status (null: none within the time). */
  deliver(receipt: OutboundReceipt, timeoutMs = 10_000): Promise<number | null> {
    if (!this.isOpen) return Promise.resolve(null);
    const options: Record<string, unknown> = {
      source_addr: receipt.sourceAddr,
      destination_addr: receipt.destinationAddr,
      esm_class: 0x04,
      data_coding: 0,
      short_message: Buffer.from(receipt.text, 'latin1'),
    };
    if (receipt.receiptedMessageId !== undefined) options.receipted_message_id = receipt.receiptedMessageId;
    if (receipt.messageState !== undefined) options.message_state = receipt.messageState;
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), timeoutMs);
      const sent = this.session.send(newPdu('deliver_sm', options), (resp: SmppPdu) => {
        clearTimeout(timer);
        resolve(resp.command_status);
      });
      if (!sent) {
        clearTimeout(timer);
        resolve(null);
      }
    });
  }

  /** Writes bytes as they are (a malformed PDU, for tests). */
  writeRaw(bytes: Uint8Array): void {
    if (this.isOpen) this.socket.write(bytes);
  }

  /** The bind dies: the socket is destroyed without an unbind. */
  kill(): void {
    this.closed = true;
    this.session.destroy();
  }

  close(): void {
    this.closed = true;
    this.session.close();
  }
}

export interface SmppServer {
  readonly port: number;
  readonly connections: ReadonlySet<SmppServerConnection>;
  close(): Promise<void>;
}

const BIND_COMMANDS: readonly BindMode[] = ['transceiver', 'transmitter', 'receiver'];

function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('latin1');
  return '';
}

function decodeSubmit(pdu: SmppPdu): InboundSubmit {
  const message = pdu.short_message as { udh?: Buffer[]; message?: unknown } | Buffer | undefined;
  const udh = message && !Buffer.isBuffer(message) && Array.isArray(message.udh) ? message.udh : [];
  const text = message && !Buffer.isBuffer(message) ? asText(message.message) : asText(message);
  return {
    sequenceNumber: pdu.sequence_number,
    serviceType: String(pdu.service_type ?? ''),
    sourceAddr: String(pdu.source_addr ?? ''),
    sourceTon: Number(pdu.source_addr_ton ?? 0),
    sourceNpi: Number(pdu.source_addr_npi ?? 0),
    destinationAddr: String(pdu.destination_addr ?? ''),
    destTon: Number(pdu.dest_addr_ton ?? 0),
    destNpi: Number(pdu.dest_addr_npi ?? 0),
    esmClass: Number(pdu.esm_class ?? 0),
    registeredDelivery: Number(pdu.registered_delivery ?? 0),
    dataCoding: Number(pdu.data_coding ?? 0),
    udh,
    text,
    sar: {
      ...(typeof pdu.sar_msg_ref_num === 'number' ? { ref: pdu.sar_msg_ref_num } : {}),
      ...(typeof pdu.sar_total_segments === 'number' ? { total: pdu.sar_total_segments } : {}),
      ...(typeof pdu.sar_segment_seqnum === 'number' ? { seq: pdu.sar_segment_seqnum } : {}),
    },
  };
}

/** Listens on host:port (0: any free port) until closed. */
export async function startSmppServer(options: {
  host: string;
  port: number;
  handlers: ServerConnectionHandlers;
  logger: Logger;
}): Promise<SmppServer> {
  const { handlers, logger } = options;
  const connections = new Set<SmppServerConnection>();
  const server: Server = createServer((socket) => {
    const session = new FramedSession({ socket });
    const connection = new SmppServerConnection(session, socket);
    connections.add(connection);
    const log = logger.child({ connection: connection.id });
    session.on('error', (error: Error) => log.debug({ err: error }, 'smpp server session error'));
    session.on('close', () => {
      connections.delete(connection);
      handlers.onClose?.(connection);
    });
    for (const mode of BIND_COMMANDS) {
      session.on(`bind_${mode}`, (pdu: SmppPdu) => {
        if (connection.bound) {
          session.send(pdu.response({ command_status: SMPP_ERRORS.ESME_RALYBND }));
          return;
        }
        const status = handlers.onBind({
          mode,
          systemId: String(pdu.system_id ?? ''),
          password: String(pdu.password ?? ''),
          systemType: String(pdu.system_type ?? ''),
        });
        if (status !== 0) {
          session.send(pdu.response({ command_status: status }));
          session.close();
          return;
        }
        connection.bound = { mode, systemId: String(pdu.system_id ?? '') };
        session.send(pdu.response({ system_id: 'herald-smsc' }));
      });
    }
    session.on('enquire_link', (pdu: SmppPdu) => session.send(pdu.response()));
    session.on('unbind', (pdu: SmppPdu) => {
      handlers.onUnbind?.(connection);
      session.send(pdu.response());
      connection.close();
    });
    session.on('submit_sm', (pdu: SmppPdu) => {
      if (!connection.bound || connection.bound.mode === 'receiver') {
        session.send(pdu.response({ command_status: SMPP_ERRORS.ESME_RINVBNDSTS }));
        return;
      }
      Promise.resolve(handlers.onSubmit(connection, decodeSubmit(pdu))).then(
        (answer) => {
          if (answer === null || !connection.isOpen) return;
          session.send(
            answer.commandStatus === 0
              ? pdu.response({ message_id: answer.messageId })
              : pdu.response({ command_status: answer.commandStatus }),
          );
        },
        (error: unknown) => {
          log.warn({ err: error }, 'submit handler failed; ESME_RSYSERR');
          session.send(pdu.response({ command_status: SMPP_ERRORS.ESME_RSYSERR }));
        },
      );
    });
    session.on('unknown', (pdu: SmppPdu) => session.send(pdu.response()));
    session.on('malformed', (malformed: MalformedPdu) => {
      handlers.onMalformed?.(connection, malformed);
      if (malformed.sequenceNumber !== 0 && connection.isOpen) {
        session.send(
          newPdu('generic_nack', {
            sequence_number: malformed.sequenceNumber,
            command_status: SMPP_ERRORS.ESME_RINVCMDLEN,
          }),
        );
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  return {
    port,
    connections,
    async close() {
      for (const connection of connections) connection.kill();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
