/**
 * `bench:dispatch --trace`: where due → published goes, per campaign, from the role processes' traces
 * (bench/support/dispatch-trace.ts) joined with the database's times. The stages are contiguous, so
 * they add up to due → published:
 *
 *   due ─► scanner sends BEGIN of the claim ─► claim COMMIT returns ─► a relay sends the claim that
 *   takes the row (NOTIFY, its delivery, the relay's wake-up) ─► that claim returns ─► publish ─►
 *   confirm ─► outbox.sent_at (the mark statement's now(); it waits for the batch's other confirms)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Distribution, distribution } from './dispatch-measure.js';
import type { TraceEvent } from './dispatch-trace.js';

export interface CampaignTimes {
  campaign_id: string;
  outbox_id: number;
  message_id: string;
  warm_up: boolean;
  due_ms: number;
  claimed_ms: number;
  sent_ms: number;
}

export const STAGES = [
  'due → scanner sends BEGIN (timer wake-up)',
  'claim transaction (BEGIN … COMMIT)',
  'COMMIT → relay sends its claim (NOTIFY, wake-up)',
  'relay claim statement',
  'claimed → publish (sink write)',
  'publish → broker confirm',
  'confirm → marked sent',
] as const;

export interface StageReport {
  traced: number;
  measured: number;
  stages: { name: string; distribution: Distribution; mean: number; slowestMean: number }[];
  /** COMMIT → NOTIFY sent: what the notifier's coalescing adds (included in the third stage). */
  commitToNotify: Distribution | undefined;
}

/** Reads every <pod>.json in `directory`, keyed by pod name. */
export function readTraces(directory: string): Map<string, TraceEvent[]> {
  const traces = new Map<string, TraceEvent[]>();
  for (const file of readdirSync(directory).filter((f) => f.endsWith('.json'))) {
    const events = JSON.parse(readFileSync(join(directory, file), 'utf8')) as TraceEvent[];
    traces.set(
      file.slice(0, -'.json'.length),
      events.sort((a, b) => a.start - b.start),
    );
  }
  return traces;
}

interface ClaimTx {
  begin: number;
  commit: number;
  notify: number | undefined;
}

export function stageReport(traces: Map<string, TraceEvent[]>, campaigns: CampaignTimes[]): StageReport {
  // Scanner side: each campaign's claim transaction (same backend pid: BEGIN before the event append,
  // the first COMMIT after it) and the first relay NOTIFY its process sent after that COMMIT.
  const claimTxOf = new Map<string, ClaimTx>();
  // Relay side: which claim statement took each outbox row, and each message's publish and confirm.
  const relayClaimOf = new Map<number, TraceEvent>();
  const publishOf = new Map<string, TraceEvent>();
  for (const events of traces.values()) {
    const notifies = events.filter((e) => e.kind === 'notify' && e.channel?.endsWith('.outbox'));
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      if (event.kind === 'append' && event.ids) {
        const samePid = (e: TraceEvent) => e.pid === event.pid;
        const begin = events
          .slice(0, i)
          .reverse()
          .find((e) => samePid(e) && e.kind === 'begin');
        const commit = events.slice(i + 1).find((e) => samePid(e) && e.kind === 'commit');
        if (!begin || !commit) continue;
        const notify = notifies.find((n) => n.start >= commit.end);
        for (const id of event.ids) {
          claimTxOf.set(String(id), { begin: begin.start, commit: commit.end, notify: notify?.start });
        }
      }
      if (event.kind === 'relay_claim') {
        for (const id of event.ids ?? []) if (Number(id) > 0) relayClaimOf.set(Number(id), event);
      }
      if (event.kind === 'publish' && event.messageId) publishOf.set(event.messageId, event);
    }
  }

  const measured = campaigns.filter((c) => !c.warm_up);
  const rows: { stages: number[]; total: number }[] = [];
  const commitToNotify: number[] = [];
  for (const c of measured) {
    const tx = claimTxOf.get(c.campaign_id);
    const claim = relayClaimOf.get(Number(c.outbox_id));
    const publish = publishOf.get(c.message_id);
    if (!tx || !claim || !publish) continue;
    const marks = [
      c.due_ms,
      tx.begin,
      tx.commit,
      claim.start,
      claim.end,
      publish.start,
      publish.end,
      c.sent_ms,
    ];
    rows.push({ stages: marks.slice(1).map((t, i) => t - marks[i]!), total: c.sent_ms - c.due_ms });
    if (tx.notify !== undefined) commitToNotify.push(tx.notify - tx.commit);
  }
  const slowest = [...rows]
    .sort((a, b) => b.total - a.total)
    .slice(0, Math.max(1, Math.ceil(rows.length / 100)));
  const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
  return {
    traced: rows.length,
    measured: measured.length,
    stages:
      rows.length === 0
        ? []
        : STAGES.map((name, i) => ({
            name,
            distribution: distribution(rows.map((r) => r.stages[i]!)),
            mean: mean(rows.map((r) => r.stages[i]!)),
            slowestMean: mean(slowest.map((r) => r.stages[i]!)),
          })),
    commitToNotify: commitToNotify.length > 0 ? distribution(commitToNotify) : undefined,
  };
}

/** The report as table lines. */
export function formatStages(report: StageReport): string[] {
  const pad = (text: string, width: number) => text.padStart(width);
  const lines = [
    `stages of due → published (ms; ${report.traced} of ${report.measured} campaigns traced):`,
    `  ${'stage'.padEnd(50)}${pad('p50', 7)}${pad('p90', 7)}${pad('p99', 7)}${pad('mean', 7)}${pad('slowest 1%', 12)}`,
  ];
  for (const stage of report.stages) {
    const d = stage.distribution;
    lines.push(
      `  ${stage.name.padEnd(50)}${pad(d.p50.toFixed(1), 7)}${pad(d.p90.toFixed(1), 7)}${pad(d.p99.toFixed(1), 7)}` +
        `${pad(stage.mean.toFixed(1), 7)}${pad(stage.slowestMean.toFixed(1), 12)}`,
    );
  }
  if (report.commitToNotify) {
    const d = report.commitToNotify;
    lines.push(
      `  (of the third stage, COMMIT → NOTIFY sent: p50=${d.p50.toFixed(1)} p99=${d.p99.toFixed(1)} max=${d.max.toFixed(1)})`,
    );
  }
  return lines;
}
