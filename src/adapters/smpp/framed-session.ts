/**
 * node-smpp's Session with a framing that survives a PDU it cannot decode (ADR 0022). The library reads
 * `command_length`, then the body, then decodes; a body that does not decode (a TLV running past the end,
 * a truncated parameter) makes it emit 'error' and stop reading the socket for ever — one malformed
 * deliver_sm would silently stall a bind. Here the PDU's bytes are consumed first, so the stream stays
 * aligned on the next PDU: an undecodable PDU is reported as 'malformed' (with its header: command id and
 * sequence number, so the peer can be answered with a generic_nack) and reading goes on. A command_length
 * outside 16..PDU.maxLength cannot be re-aligned: the session is destroyed.
 */
import { type SmppPdu, smppLibrary } from './smpp-library.js';

export interface MalformedPdu {
  readonly commandId: number;
  readonly sequenceNumber: number;
  readonly commandLength: number;
  readonly reason: string;
  /** The PDU's bytes (header included), for the record. */
  readonly raw: Buffer;
}

const { PDU } = smppLibrary;
const HEADER_LENGTH = 16;

export class FramedSession extends smppLibrary.Session {
  constructor(options: Record<string, unknown>) {
    super(options);
  }

  override _extractPDUs(): void {
    if (this._busy) return;
    this._busy = true;
    try {
      while (!this.paused) {
        if (!this._command_length) {
          const head = this.socket.read(4) as Buffer | null;
          if (!head) break;
          const length = head.readUInt32BE(0);
          if (length < HEADER_LENGTH || length > PDU.maxLength) {
            const raw = head;
            this.emit('malformed', {
              commandId: 0,
              sequenceNumber: 0,
              commandLength: length,
              reason: `command_length ${length} outside ${HEADER_LENGTH}..${PDU.maxLength}: the stream cannot be re-aligned`,
              raw,
            } satisfies MalformedPdu);
            this.socket.destroy();
            break;
          }
          this._command_length = length;
        }
        const body = this.socket.read(this._command_length - 4) as Buffer | null;
        if (!body) break;
        const length = this._command_length;
        this._command_length = null;
        const raw = Buffer.alloc(length);
        raw.writeUInt32BE(length, 0);
        body.copy(raw, 4);
        let pdu: SmppPdu;
        try {
          pdu = new PDU(raw);
        } catch (error) {
          this.emit('malformed', {
            commandId: raw.readUInt32BE(4),
            sequenceNumber: raw.readUInt32BE(12),
            commandLength: length,
            reason: error instanceof Error ? error.message : String(error),
            raw,
          } satisfies MalformedPdu);
          continue;
        }
        this.emit('pdu', pdu);
        this.emit(pdu.command, pdu);
        const callback = this._callbacks[pdu.sequence_number];
        if (pdu.isResponse() && callback) {
          delete this._callbacks[pdu.sequence_number];
          callback(pdu);
        }
      }
    } finally {
      this._busy = false;
    }
  }
}

export function newPdu(command: string, options: Record<string, unknown> = {}): SmppPdu {
  return new PDU(command, options);
}

export const SMPP_ERRORS = smppLibrary.errors;
