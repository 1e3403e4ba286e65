/**
 * The incident-analysis commands of the `herald` CLI (invariant 8): replay, verify, export and
 * projection maintenance, over every aggregate in the registry. Each parses its own options (strict: a typo is a usage
 * error, exit 2) and prints text for people or, with --json, one JSON document for machines. Exit
 * codes: 0 success, 1 failure or drift (verify), 2 usage.
 *
 *   herald replay <streamType>/<streamId> [--at <time>] [--json]
 *   herald replay --until <time> --into <schema>
 *   herald verify [--stream-type <type>]… [--organization <id>] [--json] [--max-drifts <n>]
 *   herald export [--from <time>] [--to <time>] [--stream-type <type>]… [--receipts] [--no-events] [--out <file>]
 *   herald projections status | rebuild <name>
 */

import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import type { Writable } from 'node:stream';
import { findLease } from '../adapters/postgres/lease-queries.js';
import { countAfter, listCheckpoints } from '../adapters/postgres/projection-queries.js';
import type { HeraldError } from '../errors.js';
import type { Database } from '../ports/database.js';
import { exportJsonLines } from '../projections/export.js';
import type { Projection, ProjectionSource } from '../projections/projection.js';
import { rebuildProjection } from '../projections/projector.js';
import {
  type CommandTrace,
  externalRefs,
  parseInstant,
  parseStreamRef,
  replayStream,
  type StateAt,
  type StreamReplay,
  stateAt,
} from '../projections/replay.js';
import { buildSandbox, type SandboxResult } from '../projections/sandbox.js';
import { type Drift, type VerifyReport, verifyStates } from '../projections/verify.js';
import type { AggregateRegistry } from '../registry/registry.js';
import type { Role } from '../registry/role.js';
import { oneShot as command, json, out, parse, UsageError } from './one-shot.js';

const time = (date: Date | null | undefined) => (date ? date.toISOString() : '-');
const clock = (date: Date | null | undefined) => (date ? date.toISOString().slice(11, 23) : '-');
/** ` [requestId …, retryKey …]`: the ids an outside service gave an event (nothing when there are none). */
const refsText = (refs: Record<string, string>) => {
  const pairs = Object.entries(refs).map(([name, value]) => `${name} ${value}`);
  return pairs.length > 0 ? ` [${pairs.join(', ')}]` : '';
};

// ─── replay ──────────────────────────────────────────────────────────────────────────────────────────

const REPLAY_USAGE =
  'herald replay <streamType>/<streamId> [--at <time>] [--json]  |  herald replay --until <time> --into <schema>';

function printState(state: unknown, indent = '  '): void {
  if (state === null || typeof state !== 'object') {
    out(`${indent}${JSON.stringify(state)}`);
    return;
  }
  const entries = Object.entries(state as Record<string, unknown>);
  const width = Math.max(...entries.map(([key]) => key.length));
  for (const [key, value] of entries) out(`${indent}${key.padEnd(width)}  ${JSON.stringify(value)}`);
}

function printChain(command: CommandTrace, replay: StreamReplay): void {
  const who = [
    command.correlationId ? `correlation ${command.correlationId}` : null,
    command.actor ? `actor ${command.actor}` : null,
    command.pod ? `pod ${command.pod}` : null,
    command.causationId ? `caused by message ${command.causationId}` : null,
  ].filter(Boolean);
  out(`  command  tx ${command.tx} at ${time(command.recordedAt)}: ${who.join(', ') || '(no metadata)'}`);
  for (const version of command.versions) {
    const event = replay.events.find((e) => e.version === version)!;
    out(
      `    event    v${version} ${event.type} (position ${event.position})${refsText(externalRefs(event.data))}`,
    );
  }
  for (const message of command.messages) {
    const outbox = message.outbox
      ? `outbox ${message.outbox.status}, attempts ${message.outbox.attempts}${message.outbox.lastError ? `, last error: ${message.outbox.lastError}` : ''}`
      : 'outbox row pruned';
    out(
      `    message  ${message.messageId} → ${message.sink} ${message.destination} (from v${message.eventVersion}; ${outbox})`,
    );
    if (message.receipts.length === 0) out('    receipt  none yet (not confirmed by the broker)');
    for (const r of message.receipts) {
      out(
        r.outcome === 'sent'
          ? `    receipt  sent: confirmed ${time(r.confirmedAt)}, attempts ${r.attempts}, broker ref ${r.brokerRef ?? '-'}`
          : `    receipt  dead at ${time(r.recordedAt)} after ${r.attempts} attempts: ${r.error ?? ''}`,
      );
    }
    if (message.inbox.length === 0) out('    inbox    no consumer has recorded it');
    for (const i of message.inbox) {
      out(
        `    inbox    ${i.consumer}: ${i.status} at ${time(i.processedAt)} (received ${clock(i.receivedAt)}, attempts ${i.attempts})${i.error ? `: ${i.error}` : ''}`,
      );
    }
    for (const e of message.effects) {
      out(
        `    effect   ${e.streamType}/${e.streamId} v${e.version} ${e.type}${e.actor ? ` by ${e.actor}` : ''} at ${time(e.recordedAt)}${refsText(e.externalRefs)}`,
      );
    }
  }
}

function printReplay(replay: StreamReplay): void {
  const status = (replay.state as { status?: unknown } | null)?.status;
  out(
    `${replay.streamType}/${replay.streamId}: ${replay.events.length} events, version ${replay.version}${typeof status === 'string' ? `, status ${status}` : ''}`,
  );
  out();
  out('events:');
  for (const e of replay.events) {
    const meta = [
      e.meta.actor ? `actor ${e.meta.actor}` : null,
      e.meta.pod ? `pod ${e.meta.pod}` : null,
      e.meta.correlationId ? `correlation ${e.meta.correlationId}` : null,
      e.meta.causationId ? `causation ${e.meta.causationId}` : null,
    ].filter(Boolean);
    out(
      `  v${e.version} ${time(e.recordedAt)} ${e.type} (position ${e.position}, tx ${e.tx}) ${meta.join(', ')}`,
    );
    out(`      ${JSON.stringify(e.data)}`);
  }
  out();
  out('causal chains (command → events → outbox message → publish receipt → consumer inbox → effects):');
  for (const command of replay.commands) printChain(command, replay);
  if (replay.state !== null) {
    out();
    out(`state folded from the ${replay.events.length} events:`);
    printState(replay.state);
  }
}

function printStateAt(result: StateAt): void {
  const last = result.lastEvent
    ? `version ${result.version}, last event v${result.lastEvent.version} ${result.lastEvent.type} at ${time(result.lastEvent.recordedAt)}`
    : 'version 0: the stream did not exist yet';
  out(`${result.streamType}/${result.streamId} at ${result.at}: ${last}`);
  printState(result.state);
}

function printSandbox(result: SandboxResult): void {
  out(`sandbox schema ${result.schema}: state tables as of ${result.until} (${result.ms} ms)`);
  for (const t of result.tables) {
    out(`  ${result.schema}.${t.table}: ${t.rows} rows folded from ${t.events} ${t.streamType} events`);
    for (const s of t.skipped)
      out(`    skipped ${t.streamType}/${s.streamId}: v${s.version} cannot be applied: ${s.error}`);
  }
  out(`  ${result.schema}.event, ${result.schema}.publish_receipt: views of the log up to ${result.until}`);
}

const replayCommand = command(REPLAY_USAGE, async ({ argv, registry }, db) => {
  const { values, positionals } = parse(argv, {
    at: { type: 'string' },
    until: { type: 'string' },
    into: { type: 'string' },
    json: { type: 'boolean', default: false },
  });
  if (values.until !== undefined || values.into !== undefined) {
    if (values.until === undefined || values.into === undefined || positionals.length > 0 || values.at) {
      throw new UsageError('--until and --into go together, without a stream or --at');
    }
    const result = await buildSandbox(db, registry, { until: values.until, into: values.into });
    if (values.json) out(json(result));
    else printSandbox(result);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError('replay takes one <streamType>/<streamId>');
  let ref: ReturnType<typeof parseStreamRef>;
  try {
    ref = parseStreamRef(positionals[0]!);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.at !== undefined) {
    const result = await stateAt(db, registry, ref, parseInstant(values.at, '--at'));
    if (values.json) out(json(result));
    else printStateAt(result);
    return 0;
  }
  const replay = await replayStream(db, registry, ref);
  if (values.json) out(json(replay));
  else printReplay(replay);
  return 0;
});

// ─── verify ──────────────────────────────────────────────────────────────────────────────────────────

const VERIFY_USAGE =
  'herald verify [--stream-type <type>]… [--organization <id>] [--json] [--max-drifts <n>]';

export function describeDrift(d: Drift): string {
  const at = d.firstDifferingEvent
    ? `first differing event v${d.firstDifferingEvent.version} ${d.firstDifferingEvent.type} (position ${d.firstDifferingEvent.position}, ${time(d.firstDifferingEvent.recordedAt)})`
    : 'no event explains the row';
  const what = d.field === null ? d.kind : `field ${d.field}`;
  return `DRIFT ${d.streamType}/${d.streamId} ${what}: row ${JSON.stringify(d.row)}, replay ${JSON.stringify(d.replay)}; ${at}; ${d.detail}`;
}

function printVerify(report: VerifyReport): void {
  const took = report.ms < 10_000 ? `${report.ms} ms` : `${(report.ms / 1000).toFixed(1)} s`;
  const rate = report.ms > 0 ? Math.round((report.events / report.ms) * 1000) : report.events;
  const of = report.organizationId === null ? '' : ` of organization ${report.organizationId}`;
  out(
    `verify ${report.streamTypes.join(', ')}${of}: ${report.streams} streams, ${report.events} events in ${took} (${rate} events/s): ${
      report.driftedStreams === 0 ? 'no drift' : `${report.driftedStreams} drifted stream(s)`
    }${report.truncated ? ' (report truncated)' : ''}`,
  );
}

const verifyCommand = command(VERIFY_USAGE, async ({ argv, registry }, db) => {
  const { values, positionals } = parse(argv, {
    'stream-type': { type: 'string', multiple: true },
    organization: { type: 'string' },
    json: { type: 'boolean', default: false },
    'max-drifts': { type: 'string' },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const maxDrifts = values['max-drifts'] === undefined ? undefined : Number(values['max-drifts']);
  if (maxDrifts !== undefined && (!Number.isInteger(maxDrifts) || maxDrifts < 0)) {
    throw new UsageError('--max-drifts must be a non-negative integer');
  }
  if (values.organization !== undefined && values.organization.trim() === '') {
    throw new UsageError('--organization needs an organization id');
  }
  // Every organization's streams unless one is named (then its streams only, as the API's verify).
  const report = await verifyStates(db, registry, {
    ...(values['stream-type'] ? { streamTypes: values['stream-type'] } : {}),
    ...(values.organization !== undefined ? { organizationId: values.organization } : {}),
    ...(maxDrifts !== undefined ? { maxDrifts } : {}),
    ...(values.json ? {} : { onDrift: (drift: Drift) => out(describeDrift(drift)) }),
  });
  if (values.json) out(json(report));
  else printVerify(report);
  return report.driftedStreams === 0 ? 0 : 1;
});

// ─── export ──────────────────────────────────────────────────────────────────────────────────────────

const EXPORT_USAGE =
  'herald export [--from <time>] [--to <time>] [--stream-type <type>]… [--receipts] [--no-events] [--out <file>]';

async function writeTo(stream: Writable, chunk: string): Promise<void> {
  if (!stream.write(chunk)) await once(stream, 'drain');
}

const exportCommand = command(EXPORT_USAGE, async ({ argv, registry }, db) => {
  const { values, positionals } = parse(argv, {
    from: { type: 'string' },
    to: { type: 'string' },
    'stream-type': { type: 'string', multiple: true },
    receipts: { type: 'boolean', default: false },
    'no-events': { type: 'boolean', default: false },
    out: { type: 'string' },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`);
  if (values['no-events'] && !values.receipts) throw new UsageError('--no-events needs --receipts');
  const unknown = (values['stream-type'] ?? []).filter((t) => !registry.streamTypes.includes(t));
  if (unknown.length > 0) {
    throw new UsageError(
      `unknown stream type ${unknown.join(', ')} (registered: ${registry.streamTypes.join(', ')})`,
    );
  }
  const file = values.out ? createWriteStream(values.out) : undefined;
  const target: Writable = file ?? process.stdout;
  try {
    const counts = await exportJsonLines(
      db,
      {
        from: values.from === undefined ? null : parseInstant(values.from, '--from'),
        to: values.to === undefined ? null : parseInstant(values.to, '--to'),
        streamTypes: values['stream-type'] ?? null,
        events: !values['no-events'],
        receipts: values.receipts,
        upcast: (event) => registry.upcast(event),
      },
      (chunk) => writeTo(target, chunk),
    );
    process.stderr.write(`exported ${counts.events} events, ${counts.receipts} receipts\n`);
  } finally {
    if (file) {
      file.end();
      await once(file, 'close');
    }
  }
  return 0;
});

// ─── projections ─────────────────────────────────────────────────────────────────────────────────────

const PROJECTIONS_USAGE = 'herald projections status | herald projections rebuild <name>';

async function printStatus(db: Database, registry: AggregateRegistry): Promise<void> {
  const checkpoints = new Map((await listCheckpoints(db)).map((c) => [c.name, c]));
  out(
    'projection       source    checkpoint (tx/position)   behind   updated at                 active replica',
  );
  for (const projection of registry.projections.values()) {
    const lease = await findLease(db, `projector:${projection.name}`);
    const holder =
      lease && lease.expiresAt > new Date()
        ? `${lease.owner} (term ${lease.term})`
        : lease
          ? `none (last: ${lease.owner}, expired)`
          : 'none';
    for (const source of projection.sources) {
      const name = source === 'events' ? projection.name : `${projection.name}/receipts`;
      const checkpoint = checkpoints.get(name);
      const behind = checkpoint ? await countAfter(db, source as ProjectionSource, checkpoint.cursor) : '-';
      out(
        `${projection.name.padEnd(16)} ${source.padEnd(9)} ${(checkpoint ? `${checkpoint.cursor.tx}/${checkpoint.cursor.position}` : 'not started').padEnd(26)} ${String(behind).padEnd(8)} ${time(checkpoint?.updatedAt).padEnd(26)} ${holder}`,
      );
    }
  }
}

const projectionsCommand = command(PROJECTIONS_USAGE, async ({ argv, config, logger, registry }, db) => {
  const { positionals } = parse(argv, {});
  const [action, name, ...rest] = positionals;
  if (action === 'status' && !name) {
    await printStatus(db, registry);
    return 0;
  }
  if (action === 'rebuild' && name && rest.length === 0) {
    let projection: Projection;
    try {
      projection = registry.projectionNamed(name);
    } catch (error) {
      throw new UsageError((error as HeraldError).message);
    }
    const result = await rebuildProjection(db, projection, {
      owner: `${config.pod}:rebuild`,
      batchSize: Math.max(config.projector.batchSize, 5_000),
      leaseMs: config.projector.leaseMs,
      logger,
      upcast: (event) => registry.upcast(event),
    });
    out(
      `rebuilt ${result.projection}: ${result.events} events and ${result.receipts} receipts applied to the shadow table, ${result.tail} of them in the swap transaction; swapped in after ${(result.ms / 1000).toFixed(1)} s`,
    );
    return 0;
  }
  throw new UsageError('expected `status` or `rebuild <name>`');
});

export const incidentRoles: Record<string, Role> = {
  projections: {
    summary: 'projections status | rebuild <name> (rebuilds into a shadow table, swaps when caught up)',
    usage: PROJECTIONS_USAGE,
    run: projectionsCommand,
  },
  replay: {
    summary:
      'replay <type>/<id> [--at <time>] [--json] | --until <time> --into <schema> (history, causal chains, past state)',
    usage: REPLAY_USAGE,
    run: replayCommand,
  },
  verify: {
    summary:
      "fold every stream (or one organization's) and compare with its state row; exit 1 on drift [--organization <id>] [--json]",
    usage: VERIFY_USAGE,
    run: verifyCommand,
  },
  export: {
    summary: 'events (and --receipts) as JSON Lines [--from <time>] [--to <time>] [--stream-type <type>]',
    usage: EXPORT_USAGE,
    run: exportCommand,
  },
};
