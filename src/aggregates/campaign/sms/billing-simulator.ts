/**
 * The billing test server: real HTTP (or HTTPS with an optional client-certificate requirement) on a
 * loopback port, speaking ADR 0014's billing shape, with a ledger of its own kept exactly like the
 * PostgreSQL ledger — a key applied once per kind (a repeat answers 200 with the first result,
 * `applied: false`), a deduction under a key already reversed refused (409), a deduction the balance
 * does not cover refused (402, nothing charged), a reversal of a key never deducted recorded as a zero
 * refund that blocks the key. It checks the bearer token, and plays the failures a test asks for: answer
 * 5xx without applying, hold the answer (a timeout; applied first or not), apply and lose the answer
 * (the connection dropped), refuse for insufficient balance. Every request is recorded.
 *
 * Used by the tests (test/support/billing.ts), the demo and `herald billing-simulator`; its control
 * API (`/_simulator/…`: credit an organization, read its entries) is for processes that cannot call
 * it in-process. ADR 0023.
 */
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { canonicalMoney, formatUnits, isMoney, toUnits } from '../../../domain/sms/money.js';
import { type Logger, silentLogger } from '../../../logger.js';

export type BillingSimulatorOperation = 'deduction' | 'refund' | 'reversal';

export interface BillingSimulatorEntry {
  organizationId: string;
  kind: 'credit' | 'deduction' | 'refund';
  key: string;
  amount: string;
  balanceAfter: string;
  reversedUnapplied: boolean;
  reason: string | null;
  at: string;
}

/** A failure to play for the next matching requests. */
export type BillingFault =
  /** Answer this status (5xx, 429, 401…) without applying anything. */
  | { kind: 'status'; status: number; retryAfterSeconds?: number }
  /** Never answer (the client times out); `apply`: the operation is applied first. */
  | { kind: 'hold'; apply: boolean }
  /** Apply, then drop the connection without an answer. */
  | { kind: 'lose' }
  /** Refuse a deduction with 402 whatever the balance. */
  | { kind: 'insufficient' };

export interface FaultMatch {
  operation?: BillingSimulatorOperation;
  organizationId?: string;
  /** The key, or a pattern it matches. */
  key?: string | RegExp;
}

export interface BillingRequestRecord {
  operation: BillingSimulatorOperation | 'control' | 'unknown';
  organizationId: string | null;
  key: string | null;
  idempotencyKey: string | null;
  correlationId: string | null;
  requestId: string | null;
  /** The Authorization header was a known token (or none is required). */
  authorized: boolean;
  /** What happened: applied, repeat, refused, or the fault played. */
  outcome: string;
  status: number | null;
  at: string;
}

export interface BillingSimulatorOptions {
  host?: string;
  /** 0 (default): a free port. */
  port?: number;
  /** Bearer tokens accepted; empty or absent: no token required. */
  tokens?: readonly string[];
  /** HTTPS: the server's certificate and key; `ca` + `requireClientCert`: mTLS (a client without a certificate the CA signed cannot connect). */
  tls?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer; requireClientCert?: boolean };
  logger?: Logger;
}

export interface BillingSimulator {
  readonly url: string;
  /** Adds money under a key once (a repeat changes nothing). */
  credit(organizationId: string, amount: string, key?: string): BillingSimulatorEntry;
  balance(organizationId: string): string;
  /** The ledger's entries in the order they were applied (of one organization, or all). */
  entries(organizationId?: string): BillingSimulatorEntry[];
  /** Requests seen, in order. */
  readonly requests: readonly BillingRequestRecord[];
  /** Plays `fault` on the next `times` (default 1) requests that match. */
  inject(fault: BillingFault, options?: FaultMatch & { times?: number }): void;
  clearFaults(): void;
  /** Requests held unanswered right now. */
  held(): number;
  close(): Promise<void>;
}

const operationBody = z.strictObject({
  key: z.string().min(1).max(300),
  amount: z.string().refine(isMoney, 'a non-negative decimal with at most 4 fraction digits').optional(),
  reason: z.string().max(2_000).nullable().optional(),
});

const PATH = /^\/organizations\/([^/]+)\/(deductions|refunds|reversals)$/;
const CONTROL = /^\/_simulator\/organizations\/([^/]+)\/(credits|entries)$/;
const OPERATION_OF: Record<string, BillingSimulatorOperation> = {
  deductions: 'deduction',
  refunds: 'refund',
  reversals: 'reversal',
};
const MAX_BODY_BYTES = 64 * 1024;

interface Armed extends FaultMatch {
  fault: BillingFault;
  remaining: number;
}

class Ledger {
  private readonly balances = new Map<string, number>();
  private readonly byKey = new Map<string, BillingSimulatorEntry>();
  readonly list: BillingSimulatorEntry[] = [];

  balance(org: string): number {
    return this.balances.get(org) ?? 0;
  }

  find(org: string, kind: BillingSimulatorEntry['kind'], key: string): BillingSimulatorEntry | undefined {
    return this.byKey.get(`${org}\u0000${kind}\u0000${key}`);
  }

  apply(
    org: string,
    kind: BillingSimulatorEntry['kind'],
    key: string,
    units: number,
    reason: string | null,
    reversedUnapplied = false,
  ): BillingSimulatorEntry {
    const balance = this.balance(org) + (kind === 'deduction' ? -units : units);
    if (balance < 0) throw new Error('the balance would go negative'); // guarded by the callers
    this.balances.set(org, balance);
    const entry: BillingSimulatorEntry = {
      organizationId: org,
      kind,
      key,
      amount: formatUnits(units),
      balanceAfter: formatUnits(balance),
      reversedUnapplied,
      reason,
      at: new Date().toISOString(),
    };
    this.byKey.set(`${org}\u0000${kind}\u0000${key}`, entry);
    this.list.push(entry);
    return entry;
  }
}

type Answer = { status: number; body: unknown };

function receipt(entry: BillingSimulatorEntry, applied: boolean) {
  return {
    key: entry.key,
    kind: entry.kind,
    amount: entry.amount,
    balanceAfter: entry.balanceAfter,
    applied,
    reversedUnapplied: entry.reversedUnapplied,
    at: entry.at,
  };
}

function problem(status: number, title: string, detail: string, extra: Record<string, unknown> = {}): Answer {
  return { status, body: { type: 'about:blank', title, status, detail, ...extra } };
}

export async function startBillingSimulator(
  options: BillingSimulatorOptions = {},
): Promise<BillingSimulator> {
  const logger = (options.logger ?? silentLogger).child({ component: 'billing-simulator' });
  const tokens = new Set(options.tokens ?? []);
  const ledger = new Ledger();
  const requests: BillingRequestRecord[] = [];
  let armed: Armed[] = [];
  const heldResponses = new Set<ServerResponse>();

  /** The ledger's rule for one operation (shared by faults that apply and by normal answers). */
  function operate(op: BillingSimulatorOperation, org: string, body: z.output<typeof operationBody>): Answer {
    const reason = body.reason ?? null;
    if (op === 'deduction') {
      const done = ledger.find(org, 'deduction', body.key);
      if (done) return { status: 200, body: receipt(done, false) };
      if (ledger.find(org, 'refund', body.key)) {
        return problem(409, 'Conflict', `key ${body.key} was reversed before its deduction arrived`, {
          key: body.key,
        });
      }
      const units = toUnits(body.amount!);
      const balance = ledger.balance(org);
      if (balance < units) {
        return problem(
          402,
          'Payment Required',
          `organization ${org} has ${formatUnits(balance)}, ${formatUnits(units)} needed`,
          {
            balance: formatUnits(balance),
            amount: formatUnits(units),
            key: body.key,
          },
        );
      }
      return { status: 201, body: receipt(ledger.apply(org, 'deduction', body.key, units, reason), true) };
    }
    const done = ledger.find(org, 'refund', body.key);
    if (done) return { status: 200, body: receipt(done, false) };
    if (op === 'refund') {
      return {
        status: 201,
        body: receipt(ledger.apply(org, 'refund', body.key, toUnits(body.amount!), reason), true),
      };
    }
    const deduction = ledger.find(org, 'deduction', body.key);
    const entry = deduction
      ? ledger.apply(org, 'refund', body.key, toUnits(deduction.amount), reason)
      : ledger.apply(org, 'refund', body.key, 0, reason, true);
    return { status: 201, body: receipt(entry, true) };
  }

  function takeFault(op: BillingSimulatorOperation, org: string, key: string): BillingFault | null {
    const match = armed.find(
      (a) =>
        a.remaining > 0 &&
        (a.operation === undefined || a.operation === op) &&
        (a.organizationId === undefined || a.organizationId === org) &&
        (a.key === undefined || (typeof a.key === 'string' ? a.key === key : a.key.test(key))),
    );
    if (!match) return null;
    match.remaining--;
    armed = armed.filter((a) => a.remaining > 0);
    return match.fault;
  }

  function send(response: ServerResponse, answer: Answer): void {
    const json = JSON.stringify(answer.body);
    response.writeHead(answer.status, {
      'content-type': answer.status >= 400 ? 'application/problem+json' : 'application/json',
      'content-length': Buffer.byteLength(json),
    });
    response.end(json);
  }

  async function readBody(request: IncomingMessage): Promise<string | null> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of request) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) return null;
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '').split('?')[0] ?? '';
    const header = (name: string) => {
      const value = request.headers[name];
      return typeof value === 'string' ? value : null;
    };
    const authorization = header('authorization');
    const authorized =
      tokens.size === 0 ||
      (authorization?.startsWith('Bearer ') === true && tokens.has(authorization.slice(7)));
    const record: BillingRequestRecord = {
      operation: 'unknown',
      organizationId: null,
      key: null,
      idempotencyKey: header('idempotency-key'),
      correlationId: header('x-correlation-id'),
      requestId: header('x-request-id'),
      authorized,
      outcome: 'unknown',
      status: null,
      at: new Date().toISOString(),
    };
    requests.push(record);
    const answer = (a: Answer, outcome: string) => {
      record.status = a.status;
      record.outcome = outcome;
      send(response, a);
    };
    const control = CONTROL.exec(path);
    const operation = PATH.exec(path);
    if (!control && !operation)
      return answer(problem(404, 'Not Found', `no route ${request.method} ${path}`), 'not-found');
    if (!authorized)
      return answer(problem(401, 'Unauthorized', 'a valid bearer token is required'), 'unauthorized');
    const org = decodeURIComponent((control ?? operation)![1]!);
    record.organizationId = org;
    if (control) {
      record.operation = 'control';
      if (control[2] === 'entries' && request.method === 'GET') {
        return answer(
          { status: 200, body: { entries: ledger.list.filter((e) => e.organizationId === org) } },
          'entries',
        );
      }
      if (control[2] === 'credits' && request.method === 'POST') {
        const parsed = z
          .object({ key: z.string().min(1), amount: z.string().refine(isMoney) })
          .safeParse(JSON.parse((await readBody(request)) ?? 'null'));
        if (!parsed.success)
          return answer(problem(422, 'Unprocessable Content', 'expected {key, amount}'), 'invalid');
        return answer(
          { status: 201, body: simulator.credit(org, parsed.data.amount, parsed.data.key) },
          'credit',
        );
      }
      return answer(problem(405, 'Method Not Allowed', `${request.method} ${path}`), 'not-allowed');
    }
    const op = OPERATION_OF[operation![2]!]!;
    record.operation = op;
    if (request.method !== 'POST')
      return answer(problem(405, 'Method Not Allowed', `${request.method} ${path}`), 'not-allowed');
    const text = await readBody(request);
    let parsedJson: unknown = null;
    try {
      parsedJson = text === null ? null : JSON.parse(text);
    } catch {
      parsedJson = null;
    }
    const parsed = operationBody.safeParse(parsedJson);
    const amountNeeded = op !== 'reversal';
    if (
      !parsed.success ||
      (amountNeeded && parsed.data.amount === undefined) ||
      (!amountNeeded && parsed.data.amount !== undefined)
    ) {
      return answer(
        problem(
          422,
          'Unprocessable Content',
          amountNeeded ? 'expected {key, amount, reason?}' : 'expected {key, reason?}',
        ),
        'invalid',
      );
    }
    const body = parsed.data;
    record.key = body.key;
    if (amountNeeded && toUnits(body.amount!) === 0) {
      return answer(problem(422, 'Unprocessable Content', 'a billing amount must be positive'), 'invalid');
    }
    if (record.idempotencyKey !== null && record.idempotencyKey !== body.key) {
      return answer(
        problem(422, 'Unprocessable Content', 'the Idempotency-Key header differs from the body’s key'),
        'invalid',
      );
    }
    const fault = takeFault(op, org, body.key);
    if (fault?.kind === 'status') {
      if (fault.retryAfterSeconds !== undefined)
        response.setHeader('retry-after', String(fault.retryAfterSeconds));
      return answer(
        problem(fault.status, 'Injected failure', `injected HTTP ${fault.status}`),
        `fault:status-${fault.status}`,
      );
    }
    if (fault?.kind === 'insufficient' && op === 'deduction') {
      return answer(
        problem(402, 'Payment Required', `organization ${org} cannot pay (injected)`, {
          balance: formatUnits(ledger.balance(org)),
          amount: body.amount,
          key: body.key,
        }),
        'fault:insufficient',
      );
    }
    if (fault?.kind === 'hold') {
      record.outcome = fault.apply ? `fault:hold-after-${operate(op, org, body).status}` : 'fault:hold';
      heldResponses.add(response);
      response.once('close', () => heldResponses.delete(response));
      return;
    }
    if (fault?.kind === 'lose') {
      record.outcome = `fault:lose-after-${operate(op, org, body).status}`;
      request.socket.destroy();
      return;
    }
    const a = operate(op, org, body);
    answer(a, a.status === 201 ? 'applied' : a.status === 200 ? 'repeat' : `refused-${a.status}`);
  }

  const listener = (request: IncomingMessage, response: ServerResponse) => {
    handle(request, response).catch((error: unknown) => {
      logger.error({ err: error }, 'billing simulator request failed');
      if (!response.headersSent) send(response, problem(500, 'Internal Server Error', 'simulator error'));
    });
  };
  const server: Server = options.tls
    ? createHttpsServer(
        {
          cert: options.tls.cert,
          key: options.tls.key,
          ...(options.tls.ca ? { ca: options.tls.ca } : {}),
          ...(options.tls.requireClientCert ? { requestCert: true, rejectUnauthorized: true } : {}),
        },
        listener,
      )
    : createHttpServer(listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `${options.tls ? 'https' : 'http'}://${host}:${address.port}`;
  logger.info({ url }, 'billing simulator listening');

  const simulator: BillingSimulator = {
    url,
    credit(organizationId, amount, key = `credit:${ledger.list.length + 1}`) {
      const done = ledger.find(organizationId, 'credit', key);
      return done ?? ledger.apply(organizationId, 'credit', key, toUnits(canonicalMoney(amount)), 'credit');
    },
    balance: (organizationId) => formatUnits(ledger.balance(organizationId)),
    entries: (organizationId) =>
      ledger.list
        .filter((e) => organizationId === undefined || e.organizationId === organizationId)
        .map((e) => ({ ...e })),
    requests,
    inject(fault, { times = 1, ...match } = {}) {
      armed.push({ fault, remaining: times, ...match });
    },
    clearFaults() {
      armed = [];
    },
    held: () => heldResponses.size,
    async close() {
      for (const response of heldResponses) response.destroy();
      heldResponses.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return simulator;
}
