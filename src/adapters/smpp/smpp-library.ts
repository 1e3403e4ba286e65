/**
 * The `smpp` npm package (node-smpp, SMPP 3.4/5.0 client and server sessions; ADR 0022), loaded once and
 * typed here: the package ships no type declarations, so this module states the part of its API the
 * adapter uses. Only src/adapters/smpp imports it (the architecture test checks that drivers stay in
 * src/adapters).
 */
import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

/** A decoded PDU: header fields plus the command's parameters and TLVs by name. */
export interface SmppPdu {
  command: string;
  command_id: number;
  command_status: number;
  sequence_number: number;
  isResponse(): boolean;
  response(options?: Record<string, unknown>): SmppPdu;
  toBuffer(): Buffer;
  [field: string]: unknown;
}

export interface SmppPduConstructor {
  new (command: string | Buffer, options?: Record<string, unknown>): SmppPdu;
  maxLength: number;
}

/** node-smpp's Session (an EventEmitter over a socket), with the internals the framing override uses. */
export interface SmppSessionInstance extends EventEmitter {
  socket: Socket;
  paused: boolean;
  _busy: boolean;
  _command_length: number | null;
  _callbacks: Record<number, (pdu: SmppPdu) => void>;
  send(
    pdu: SmppPdu,
    responseCallback?: (pdu: SmppPdu) => void,
    sendCallback?: (pdu: SmppPdu) => void,
  ): boolean;
  close(callback?: () => void): void;
  destroy(callback?: () => void): void;
  pause(): void;
  resume(): void;
  _extractPDUs(): void;
}

export interface SmppSessionConstructor {
  new (options: Record<string, unknown>): SmppSessionInstance;
  prototype: SmppSessionInstance;
}

export interface SmppLibrary {
  Session: SmppSessionConstructor;
  PDU: SmppPduConstructor;
  errors: Readonly<Record<string, number>>;
}

const require = createRequire(import.meta.url);

export const smppLibrary = require('smpp') as SmppLibrary;
