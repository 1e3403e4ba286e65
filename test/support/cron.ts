/**
 * Fixtures for cron tests: a CronService on a test database, a real HTTP server on loopback that
 * records every request and answers as told (status, delay), a real SMTP server (smtp-server), and
 * time helpers on the database clock.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { CronService } from '../../src/aggregates/cron/service.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import type { Database } from '../../src/ports/database.js';

export function cronService(db: Database, settings: { backfillMax?: number } = {}): CronService {
  return new CronService({ db, handler: new CommandHandler({ db, pod: 'test' }), settings });
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
}

export interface TestHttpServer {
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Requests to a path. */
  to(path: string): RecordedRequest[];
  /** How to answer a path (default 200 "ok"). */
  respond(path: string, answer: { status?: number; delayMs?: number; body?: string }): void;
  /** Most requests in flight at once so far. */
  readonly maxInFlight: number;
  close(): Promise<void>;
}

export async function startHttpServer(): Promise<TestHttpServer> {
  const requests: RecordedRequest[] = [];
  const answers = new Map<string, { status?: number; delayMs?: number; body?: string }>();
  let inFlight = 0;
  let maxInFlight = 0;
  const server: Server = createServer((req, res) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      requests.push({
        method: req.method ?? 'GET',
        path,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      });
      const answer = answers.get(path) ?? {};
      const reply = () => {
        inFlight--;
        if (res.destroyed) return;
        res.writeHead(answer.status ?? 200, { 'content-type': 'text/plain' });
        res.end(answer.body ?? 'ok');
      };
      if (answer.delayMs) setTimeout(reply, answer.delayMs);
      else reply();
    });
    res.on('close', () => {
      if (!res.writableEnded) inFlight = Math.max(0, inFlight - 1);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    to: (path) => requests.filter((r) => r.path === path),
    respond: (path, answer) => answers.set(path, answer),
    get maxInFlight() {
      return maxInFlight;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
}

export interface TestSmtpServer {
  url: string;
  mails: ReceivedMail[];
  /** Answer every message with this SMTP reply code (e.g. 451 transient, 550 permanent); undefined: accept. */
  rejectWith: number | undefined;
  close(): Promise<void>;
}

export async function startSmtpServer(): Promise<TestSmtpServer> {
  const state: TestSmtpServer = {
    url: '',
    mails: [],
    rejectWith: undefined,
    close: async () => {},
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (state.rejectWith !== undefined) {
          const error = new Error(`test server rejects (${state.rejectWith})`) as Error & {
            responseCode: number;
          };
          error.responseCode = state.rejectWith;
          callback(error);
          return;
        }
        state.mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  state.url = `smtp://127.0.0.1:${port}`;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}

/** The database clock now, as epoch ms. */
export async function dbNowMs(db: Database): Promise<number> {
  const { rows } = await db.query<{ now: Date }>('select clock_timestamp() as now');
  return rows[0]!.now.getTime();
}
