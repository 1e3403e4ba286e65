/**
 * bench:smpp's raw ceiling, as its own process: a bare `smpp` (node-smpp) client — no database, no
 * Herald code — binds once as a transceiver and submits the PDUs listed in BENCH_PDUS (JSON lines, the
 * submit_sm parameters the gateway wrote, made by the benchmark before this process starts) with at most
 * BENCH_WINDOW unanswered, the next written as soon as a response frees a slot. Receipts (deliver_sm)
 * are answered at once. Reports one JSON line: the submits, how many the SMSC accepted, and the time from
 * the first write to the last response.
 *   BENCH_SMPP_PORT, BENCH_SYSTEM_ID, BENCH_PASSWORD, BENCH_PDUS, BENCH_WINDOW
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

interface Pdu {
  command_status: number;
  sequence_number: number;
  response(options?: Record<string, unknown>): Pdu;
}
interface Session {
  on(event: string, listener: (pdu: Pdu) => void): void;
  send(pdu: Pdu): boolean;
  bind_transceiver(options: Record<string, unknown>, callback: (pdu: Pdu) => void): boolean;
  submit_sm(options: Record<string, unknown>, callback: (pdu: Pdu) => void): boolean;
  unbind(callback: (pdu: Pdu) => void): boolean;
  close(callback?: () => void): void;
}
const smpp = createRequire(import.meta.url)('smpp') as {
  connect(options: { host: string; port: number }, listener: () => void): Session;
};

interface PduLine {
  source_addr: string;
  source_addr_ton: number;
  source_addr_npi: number;
  destination_addr: string;
  dest_addr_ton: number;
  dest_addr_npi: number;
  esm_class: number;
  data_coding: number;
  registered_delivery: number;
  service_type: string;
  /** hex */
  short_message: string;
}

const window = Number(process.env.BENCH_WINDOW ?? 10);
// Every PDU's parameters ready before the bind (the short message as a Buffer, as the gateway passes it).
const pdus = readFileSync(process.env.BENCH_PDUS!, 'utf8')
  .split('\n')
  .filter((line) => line.length > 0)
  .map((line) => {
    const p = JSON.parse(line) as PduLine;
    return { ...p, short_message: Buffer.from(p.short_message, 'hex') };
  });

const session = await new Promise<Session>((resolve, reject) => {
  const s: Session = smpp.connect({ host: '127.0.0.1', port: Number(process.env.BENCH_SMPP_PORT) }, () =>
    s.bind_transceiver(
      { system_id: process.env.BENCH_SYSTEM_ID, password: process.env.BENCH_PASSWORD },
      (pdu) =>
        pdu.command_status === 0 ? resolve(s) : reject(new Error(`bind refused: ${pdu.command_status}`)),
    ),
  );
  s.on('error', (error) => reject(error));
});
let receipts = 0;
session.on('deliver_sm', (pdu) => {
  receipts++;
  session.send(pdu.response());
});

let next = 0;
let answered = 0;
let accepted = 0;
const statuses: Record<string, number> = {};
let started = 0;
const elapsedMs = await new Promise<number>((resolve) => {
  const submit = () => {
    const options = pdus[next++]!;
    const written = session.submit_sm(options, (resp) => {
      answered++;
      if (resp.command_status === 0) accepted++;
      else statuses[resp.command_status] = (statuses[resp.command_status] ?? 0) + 1;
      if (next < pdus.length) submit();
      else if (answered === pdus.length) resolve(performance.now() - started);
    });
    if (!written) throw new Error('the socket was not writable');
  };
  started = performance.now();
  for (let i = 0; i < Math.min(window, pdus.length); i++) submit();
});
await new Promise<void>((resolve) => session.unbind(() => resolve()));
session.close();
process.stdout.write(
  `${JSON.stringify({ submits: pdus.length, accepted, refused: statuses, receipts, elapsedMs })}\n`,
);
process.exit(0);
