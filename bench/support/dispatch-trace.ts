/**
 * Bench-only preload for `bench:dispatch --trace` (never loaded by Herald itself): in a role process,
 * timestamps every statement of the dispatch path (pg's Client.prototype.query, wrapped) and every
 * publish and its confirm (amqplib's ConfirmChannel.prototype.publish, wrapped), and writes them to
 * $HERALD_BENCH_TRACE_DIR/<HERALD_POD>.json when the process exits. Times are epoch ms from
 * performance.timeOrigin + performance.now(): the system clock, as PostgreSQL's now() is, at µs
 * resolution. Inactive unless HERALD_BENCH_TRACE_DIR is set.
 */
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export type TraceKind =
  | 'begin'
  | 'commit'
  | 'lock_due'
  | 'append'
  | 'notify'
  | 'relay_claim'
  | 'publish'
  | 'mark'
  | 'other';

export interface TraceEvent {
  kind: TraceKind;
  /** Sent (statement) or published (message), epoch ms. */
  start: number;
  /** Result received (statement) or confirmed (message), epoch ms. */
  end: number;
  /** Backend pid: statements of one transaction share it. */
  pid?: number;
  /** append: campaign ids; relay_claim: outbox ids claimed; mark: outbox ids marked. */
  ids?: (string | number)[];
  /** notify: the channel. */
  channel?: string;
  /** publish: the message id. */
  messageId?: string;
}

/** Recognizes the dispatch path's statements by text that survives edits to the rest of the query. */
export function traceKind(text: string): TraceKind {
  const sql = text.trim().toLowerCase();
  if (sql === 'begin') return 'begin';
  if (sql === 'commit') return 'commit';
  if (sql.includes('pg_notify')) return 'notify';
  if (sql.includes('from campaign') && sql.includes('skip locked') && sql.includes("'scheduled'")) {
    return 'lock_due';
  }
  if (sql.startsWith('insert into event')) return 'append';
  if (sql.includes("set status = 'sent'")) return 'mark';
  if (sql.includes('update outbox') && sql.includes('attempts = o.attempts + 1')) return 'relay_claim';
  return 'other';
}

type Callback = (error: unknown, result?: { rows?: { id?: unknown }[] }) => void;

function install(directory: string, pod: string): void {
  const require = createRequire(import.meta.url);
  const pg = require('pg') as { Client: { prototype: Record<string, unknown> } };
  const { ConfirmChannel } = require('amqplib/lib/channel_model.js') as {
    ConfirmChannel: { prototype: Record<string, unknown> };
  };
  const events: TraceEvent[] = [];
  const now = () => performance.timeOrigin + performance.now();

  const query = pg.Client.prototype.query as (this: { processID?: number }, ...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (
    this: { processID?: number },
    config: unknown,
    values?: unknown,
    callback?: unknown,
  ) {
    const text = typeof config === 'string' ? config : (config as { text?: unknown } | null)?.text;
    if (typeof text !== 'string') return query.call(this, config, values, callback);
    const kind = traceKind(text);
    const start = now();
    const pid = this.processID;
    // Values come as the second argument, or inside the config (named prepared statements).
    const params = Array.isArray(values)
      ? values
      : ((config as { values?: unknown[] } | null)?.values ?? undefined);
    const record = (result?: { rows?: { id?: unknown }[] }) => {
      const event: TraceEvent = { kind, start, end: now(), pid };
      if (kind === 'append') event.ids = params?.[1] as string[];
      if (kind === 'mark') event.ids = ((params?.[0] as unknown[] | undefined) ?? []).map(Number);
      if (kind === 'relay_claim') event.ids = (result?.rows ?? []).map((row) => Number(row.id));
      if (kind === 'notify') event.channel = params?.[0] as string;
      events.push(event);
    };
    if (typeof values === 'function') {
      const inner = values as Callback;
      return query.call(this, config, (error: unknown, result?: { rows?: { id?: unknown }[] }) => {
        record(result);
        inner(error, result);
      });
    }
    if (typeof callback === 'function') {
      const inner = callback as Callback;
      return query.call(this, config, values, (error: unknown, result?: { rows?: { id?: unknown }[] }) => {
        record(result);
        inner(error, result);
      });
    }
    const pending = query.call(this, config, values);
    if (pending && typeof (pending as Promise<unknown>).then === 'function') {
      (pending as Promise<{ rows?: { id?: unknown }[] }>).then(record, () => {});
    }
    return pending;
  };

  const publish = ConfirmChannel.prototype.publish as (...args: unknown[]) => unknown;
  ConfirmChannel.prototype.publish = function (
    exchange: unknown,
    routingKey: unknown,
    content: unknown,
    options?: { messageId?: string },
    callback?: Callback,
  ) {
    const start = now();
    return publish.call(this, exchange, routingKey, content, options, (error: unknown, ok?: unknown) => {
      events.push({ kind: 'publish', start, end: now(), messageId: options?.messageId });
      callback?.(error, ok as undefined);
    });
  };

  process.on('exit', () => writeFileSync(join(directory, `${pod}.json`), JSON.stringify(events)));
}

const directory = process.env.HERALD_BENCH_TRACE_DIR;
const pod = process.env.HERALD_POD;
if (directory && pod) install(directory, pod);
