/**
 * Bench-only preload for `bench:smpp --trace` (never loaded by Herald itself): in the `herald sms-gateway`
 * process, times every transaction (pg's Client.prototype.query wrapped: BEGIN sent → COMMIT answered) and
 * every statement in it, and sorts the transactions by what they did — the window claim (the `sending`
 * intent), the answers recorded, the receipts recorded, the consumer's inbox transaction, the sweeps — and
 * writes the totals to $HERALD_BENCH_TRACE_DIR/<HERALD_POD>.json when the process exits (SIGTERM: the
 * gateway stops cleanly). Also counts the rows each kind handled (parts claimed, answers, receipts).
 * Inactive unless HERALD_BENCH_TRACE_DIR is set.
 */
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export type GatewayTransaction = 'claim' | 'responses' | 'receipts' | 'consumer' | 'sweeps' | 'other';

export interface KindTotals {
  transactions: number;
  /** BEGIN sent → COMMIT answered, summed, ms. */
  totalMs: number;
  /** The slowest single transaction, ms. */
  maxMs: number;
  /** Rows handled: parts claimed (claim), answers (responses), receipts (receipts), chunks (consumer). */
  rows: number;
  /** Per statement (a short name), summed ms and count. */
  statements: Record<string, { count: number; totalMs: number }>;
}

export type GatewayTrace = Record<GatewayTransaction, KindTotals>;

/** A short name for a statement of the gateway's paths, from text that survives edits to the rest. */
export function statementName(text: string): string {
  const sql = text.trim().toLowerCase();
  if (sql === 'begin' || sql === 'commit' || sql === 'rollback') return sql;
  if (sql.includes("set state = 'sending'")) return 'claim parts (mark sending)';
  if (sql.includes('set state = x.state')) return 'record answers';
  if (sql.startsWith('insert into sms_gateway_receipt')) return 'insert receipts';
  if (sql.includes('update sms_gateway_receipt r set part_id')) return 'match receipts';
  if (sql.includes('from sms_gateway_part p') && sql.includes('not exists (select 1 from sms_gateway_report'))
    return 'parts of recipients';
  if (sql.includes('insert into sms_gateway_report')) return 'insert reports';
  if (sql.startsWith('insert into event')) return 'append event';
  if (sql.startsWith('insert into outbox')) return 'outbox rows';
  if (sql.includes('insert into inbox')) return 'inbox claim';
  if (sql.startsWith('insert into sms_gateway_submission')) return 'insert submission';
  if (sql.startsWith('insert into sms_gateway_part')) return 'insert parts';
  if (sql.includes('from campaign where id = $1) as campaign_status')) return 'fence (campaign, recipients)';
  if (sql.includes("set state = 'unconfirmed'")) return 'unconfirmed sweep';
  if (sql.startsWith('update inbox')) return 'inbox mark';
  return sql.split(/\s+/).slice(0, 4).join(' ');
}

function kindOf(statements: readonly string[]): GatewayTransaction {
  if (statements.includes('claim parts (mark sending)')) return 'claim';
  if (statements.includes('record answers')) return 'responses';
  if (statements.includes('insert receipts')) return 'receipts';
  if (statements.includes('insert submission') || statements.includes('inbox claim')) return 'consumer';
  if (statements.includes('unconfirmed sweep') || statements.includes('match receipts')) return 'sweeps';
  return 'other';
}

type Callback = (error: unknown, result?: { rows?: unknown[] }) => void;

interface OpenTransaction {
  started: number;
  statements: { name: string; ms: number; rows: number; values: number }[];
}

function install(directory: string, pod: string): void {
  const require = createRequire(import.meta.url);
  const pg = require('pg') as { Client: { prototype: Record<string, unknown> } };
  const empty = (): KindTotals => ({ transactions: 0, totalMs: 0, maxMs: 0, rows: 0, statements: {} });
  const trace: GatewayTrace = {
    claim: empty(),
    responses: empty(),
    receipts: empty(),
    consumer: empty(),
    sweeps: empty(),
    other: empty(),
  };
  const open = new WeakMap<object, OpenTransaction>();
  const now = () => performance.now();

  const finish = (txn: OpenTransaction) => {
    const names = txn.statements.map((s) => s.name);
    const kind = kindOf(names);
    const totals = trace[kind];
    const ms = now() - txn.started;
    totals.transactions++;
    totals.totalMs += ms;
    totals.maxMs = Math.max(totals.maxMs, ms);
    for (const s of txn.statements) {
      const entry = totals.statements[s.name] ?? { count: 0, totalMs: 0 };
      entry.count++;
      entry.totalMs += s.ms;
      totals.statements[s.name] = entry;
      if (kind === 'claim' && s.name === 'claim parts (mark sending)') totals.rows += s.rows;
      if (kind === 'responses' && s.name === 'record answers') totals.rows += s.values;
      if (kind === 'receipts' && s.name === 'insert receipts') totals.rows += s.rows;
      if (kind === 'consumer' && s.name === 'insert submission') totals.rows += s.rows;
    }
  };

  const query = pg.Client.prototype.query as (this: object, ...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: object, config: unknown, values?: unknown, callback?: unknown) {
    const text = typeof config === 'string' ? config : (config as { text?: unknown } | null)?.text;
    if (typeof text !== 'string') return query.call(this, config, values, callback);
    const name = statementName(text);
    const start = now();
    if (name === 'begin') open.set(this, { started: start, statements: [] });
    const params = Array.isArray(values)
      ? values
      : ((config as { values?: unknown[] } | null)?.values ?? undefined);
    const record = (result?: { rows?: unknown[] }) => {
      const txn = open.get(this);
      if (!txn) return;
      const first = params?.[1];
      txn.statements.push({
        name,
        ms: now() - start,
        rows: result?.rows?.length ?? 0,
        values: Array.isArray(first) ? first.length : 0,
      });
      if (name === 'commit' || name === 'rollback') {
        open.delete(this);
        if (name === 'commit') finish(txn);
      }
    };
    if (typeof values === 'function') {
      const inner = values as Callback;
      return query.call(this, config, (error: unknown, result?: { rows?: unknown[] }) => {
        record(result);
        inner(error, result);
      });
    }
    if (typeof callback === 'function') {
      const inner = callback as Callback;
      return query.call(this, config, values, (error: unknown, result?: { rows?: unknown[] }) => {
        record(result);
        inner(error, result);
      });
    }
    const pending = query.call(this, config, values);
    if (pending && typeof (pending as Promise<unknown>).then === 'function') {
      (pending as Promise<{ rows?: unknown[] }>).then(record, () => {});
    }
    return pending;
  };

  process.on('exit', () => writeFileSync(join(directory, `${pod}.json`), JSON.stringify(trace)));
}

const directory = process.env.HERALD_BENCH_TRACE_DIR;
const pod = process.env.HERALD_POD;
if (directory && pod) install(directory, pod);
