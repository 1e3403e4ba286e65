/**
 * Herald's Prometheus metrics: one prom-client registry per process (`heraldMetrics`), shared by every role
 * it runs and by the HTTP API. Only this module (and the API, for its own series) imports prom-client: the
 * relay, the sweepers and the delivery policy record through small meter objects created once, so hot
 * paths only bump a labelled child. Series are kept in process or read at scrape time by indexed queries
 * bounded by a timeout; without the database the scrape still answers. Label values are bounded. It only
 * observes: no invariant rests on it. ADR 0013.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Sink } from '../ports/outbox.js';

/** Claim, publish and mark latencies: milliseconds up to a few seconds (a lost broker: the confirm timeout). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Due → claimed: milliseconds when the scanners keep up, minutes when they were down. */
const DUE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/** Every sink an outbox row can name: their backlog series are 0, not absent, when nothing is pending. */
const SINKS: readonly Sink[] = ['amqp', 'kafka'];

export type ConsumerOutcome = 'processed' | 'duplicate' | 'discarded' | 'rejected' | 'retried' | 'dead';

const CONSUMER_OUTCOMES: readonly ConsumerOutcome[] = [
  'processed',
  'duplicate',
  'discarded',
  'rejected',
  'retried',
  'dead',
];

/** One relay sink's series (label `sink`). */
export interface RelaySinkMeters {
  /** Rows confirmed by the broker and marked sent. */
  published(count: number): void;
  /** Failed publish attempts written back (a retry scheduled, or the row made dead). */
  failed(count: number): void;
  /** Rows made dead. */
  dead(count: number): void;
  /** One publish call: handed to the sink → every message of it confirmed or refused. */
  confirmed(seconds: number): void;
}

/** One sweep's series (labels `aggregate`, `sweeper`). */
export interface SweeperMeters {
  /** A stream the sweep changed, by the outcome counter its definition names (claimed, expired, reclaimed, …). */
  swept(outcome: string): void;
  /** One sweep transaction that found work. */
  batch(seconds: number): void;
  /** A claimed stream's wait: the transaction's database time minus the due time its row said. */
  dueToClaimed(seconds: number): void;
}

/** One consumer's series (labels `queue`, `consumer`). */
export interface ConsumerMeters {
  count(outcome: ConsumerOutcome): void;
}

/** What one scrape reads from the database (src/health/database-sample.ts reads it). */
export interface DatabaseSample {
  outbox: readonly { sink: string; pending: number; oldestAgeSeconds: number }[];
  dead: readonly { sink: string; dead: number; parkedKeys: number }[];
  leases: readonly { name: string; ageSeconds: number; held: boolean }[];
  projections: readonly {
    projection: string;
    source: 'events' | 'receipts';
    present: boolean;
    lagSeconds: number;
  }[];
}

/** Where the scrape-time series come from: null when the database does not answer in time. */
export interface DatabaseSource {
  sample(): Promise<DatabaseSample | null>;
}

export interface SmsGatewayMeters {
  submit(outcome: 'accepted' | 'throttled' | 'retryable' | 'permanent' | 'unconfirmed' | 'not_written'): void;
  receipt(kind: 'receipt' | 'not_understood' | 'malformed_pdu', count?: number): void;
  bind(mode: string, delta: 1 | -1): void;
}

export class HeraldMetrics {
  readonly registry = new Registry();

  private readonly relayPublished = new Counter({
    name: 'herald_relay_published_total',
    help: 'Outbox rows the relay published: confirmed by the broker and marked sent.',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  private readonly relayFailed = new Counter({
    name: 'herald_relay_failed_total',
    help: 'Failed publish attempts (nack, unroutable, no broker): each schedules a retry or makes the row dead.',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  private readonly relayDead = new Counter({
    name: 'herald_relay_dead_total',
    help: 'Outbox rows made dead by their last failed attempt (maintenance re-queues them after a cooldown).',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  private readonly relayBatch = new Histogram({
    name: 'herald_relay_batch_duration_seconds',
    help: 'One relay batch from its claim to its rows marked sent or rescheduled.',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly relayConfirm = new Histogram({
    name: 'herald_relay_confirm_duration_seconds',
    help: "One publish call: from handing a batch to the sink to the broker's last confirm (or refusal) of it.",
    labelNames: ['sink'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly relayClaims = new Set<() => number | null>();
  private readonly sweeperClaims = new Counter({
    name: 'herald_sweeper_claims_total',
    help: 'Streams a sweep claimed or otherwise changed, by outcome (claimed, expired, reclaimed, materialized, …).',
    labelNames: ['aggregate', 'sweeper', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly sweeperBatch = new Histogram({
    name: 'herald_sweeper_batch_duration_seconds',
    help: 'One sweep transaction that found work: lock the batch, decide, append, save, write the outbox.',
    labelNames: ['aggregate', 'sweeper'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly sweeperDue = new Histogram({
    name: 'herald_sweeper_due_to_claimed_seconds',
    help: "From the time a stream's row said it was due to the database time of the transaction that claimed it.",
    labelNames: ['aggregate', 'sweeper'] as const,
    buckets: DUE_BUCKETS,
    registers: [this.registry],
  });
  private readonly consumerMessages = new Counter({
    name: 'herald_consumer_messages_total',
    help: 'Deliveries a consumer settled, by outcome: processed, duplicate, discarded, rejected, retried, dead.',
    labelNames: ['queue', 'consumer', 'outcome'] as const,
    registers: [this.registry],
  });

  private readonly smsGatewaySubmits = new Counter({
    name: 'herald_sms_gateway_submits_total',
    help: 'submit_sm written by herald sms-gateway, by SMSC and outcome: accepted, throttled, retryable, permanent, unconfirmed, not_written (never left the process).',
    labelNames: ['smsc', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly smsGatewayReceipts = new Counter({
    name: 'herald_sms_gateway_receipts_total',
    help: 'deliver_sm recorded by herald sms-gateway, by SMSC and kind: receipt, not_understood, malformed_pdu.',
    labelNames: ['smsc', 'kind'] as const,
    registers: [this.registry],
  });
  private readonly smsGatewayBinds = new Gauge({
    name: 'herald_sms_gateway_binds',
    help: 'SMPP binds up in this process, by SMSC and mode (transceiver, transmitter, receiver).',
    labelNames: ['smsc', 'mode'] as const,
    registers: [this.registry],
  });

  private readonly sources: DatabaseSource[] = [];
  private sampling: Promise<DatabaseSample | null> | undefined;
  private processMetrics = false;

  constructor() {
    const metrics = this;
    new Gauge({
      name: 'herald_relay_claim_age_seconds',
      help: 'Age of the oldest batch a relay of this process holds claimed and not yet marked, 0 when none (its rows are leased for HERALD_RELAY_LOCK_SECONDS).',
      registers: [this.registry],
      collect() {
        const now = performance.now();
        let oldest = now;
        for (const claimedAt of metrics.relayClaims) oldest = Math.min(oldest, claimedAt() ?? now);
        this.set((now - oldest) / 1000);
      },
    });
    new Gauge({
      name: 'herald_metrics_database_up',
      help: "1 when this scrape's database queries answered, 0 when they failed or no database is attached (the database series are then absent).",
      registers: [this.registry],
      async collect() {
        this.set((await metrics.sample()) ? 1 : 0);
      },
    });
    this.databaseGauge(
      'herald_outbox_pending',
      'Pending outbox rows (due, in backoff, in flight, or waiting behind their ordered key).',
      ['sink'],
      (sample, set) => {
        for (const sink of SINKS) set({ sink }, 0);
        for (const row of sample.outbox) set({ sink: row.sink }, row.pending);
      },
    );
    this.databaseGauge(
      'herald_outbox_oldest_pending_age_seconds',
      'Age of the oldest pending outbox row, by the database clock (0: none pending).',
      ['sink'],
      (sample, set) => {
        for (const sink of SINKS) set({ sink }, 0);
        for (const row of sample.outbox) set({ sink: row.sink }, row.oldestAgeSeconds);
      },
    );
    this.databaseGauge(
      'herald_outbox_dead',
      'Dead outbox rows (their attempts ran out): maintenance re-queues them after a cooldown, for a bounded number of rounds.',
      ['sink'],
      (sample, set) => {
        for (const sink of SINKS) set({ sink }, 0);
        for (const row of sample.dead) set({ sink: row.sink }, row.dead);
      },
    );
    this.databaseGauge(
      'herald_outbox_parked_keys',
      'Ordered keys held back by a dead row (`herald outbox parked`; requeue or skip the head).',
      ['sink'],
      (sample, set) => {
        for (const sink of SINKS) set({ sink }, 0);
        for (const row of sample.dead) set({ sink: row.sink }, row.parkedKeys);
      },
    );
    this.databaseGauge(
      'herald_lease_age_seconds',
      'Seconds since a lease (table `lease`: one per projection, plus running rebuilds) was last renewed, by the database clock.',
      ['lease'],
      (sample, set) => {
        for (const row of sample.leases) set({ lease: row.name }, row.ageSeconds);
      },
    );
    this.databaseGauge(
      'herald_lease_held',
      '1 while a lease is unexpired (a replica holds it), else 0.',
      ['lease'],
      (sample, set) => {
        for (const row of sample.leases) set({ lease: row.name }, row.held ? 1 : 0);
      },
    );
    this.databaseGauge(
      'herald_projector_lag_seconds',
      'Age of the oldest event (or publish receipt) a projection has not applied yet; 0 when caught up.',
      ['projection', 'source'],
      (sample, set) => {
        for (const row of sample.projections) {
          if (row.present) set({ projection: row.projection, source: row.source }, row.lagSeconds);
        }
      },
    );
  }

  /** Node.js process series (CPU, memory, event-loop lag, GC): enabled by the first endpoint, once. */
  enableProcessMetrics(): void {
    if (this.processMetrics) return;
    this.processMetrics = true;
    collectDefaultMetrics({ register: this.registry });
  }

  /** The text exposition of every series, for `/metrics`. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  relaySink(sink: string): RelaySinkMeters {
    const published = this.relayPublished.labels(sink);
    const failed = this.relayFailed.labels(sink);
    const dead = this.relayDead.labels(sink);
    const confirm = this.relayConfirm.labels(sink);
    published.inc(0);
    failed.inc(0);
    dead.inc(0);
    this.relayConfirm.zero({ sink });
    return {
      published: (count) => {
        if (count > 0) published.inc(count);
      },
      failed: (count) => {
        if (count > 0) failed.inc(count);
      },
      dead: (count) => {
        if (count > 0) dead.inc(count);
      },
      confirmed: (seconds) => confirm.observe(seconds),
    };
  }

  relayBatchDone(seconds: number): void {
    this.relayBatch.observe(seconds);
  }

  /**
   * A relay reports the claim time (performance.now()) of the oldest batch it holds, or null; returns
   * the function that stops reporting (the relay stopped).
   */
  trackRelayClaims(oldestClaimAt: () => number | null): () => void {
    this.relayClaims.add(oldestClaimAt);
    return () => this.relayClaims.delete(oldestClaimAt);
  }

  sweeper(aggregate: string, sweeper: string): SweeperMeters {
    const batch = this.sweeperBatch.labels(aggregate, sweeper);
    const due = this.sweeperDue.labels(aggregate, sweeper);
    this.sweeperBatch.zero({ aggregate, sweeper });
    this.sweeperDue.zero({ aggregate, sweeper });
    const outcomes = new Map<string, Counter.Internal>();
    return {
      swept: (outcome) => {
        let counter = outcomes.get(outcome);
        if (!counter) {
          counter = this.sweeperClaims.labels(aggregate, sweeper, outcome);
          outcomes.set(outcome, counter);
        }
        counter.inc();
      },
      batch: (seconds) => batch.observe(seconds),
      dueToClaimed: (seconds) => due.observe(seconds),
    };
  }

  /** The SMS gateway's meters of one SMSC connection (ADR 0022). */
  smsGateway(smsc: string): SmsGatewayMeters {
    return {
      submit: (outcome) => this.smsGatewaySubmits.inc({ smsc, outcome }),
      receipt: (kind, count = 1) => this.smsGatewayReceipts.inc({ smsc, kind }, count),
      bind: (mode, delta) => this.smsGatewayBinds.inc({ smsc, mode }, delta),
    };
  }

  consumer(queue: string, consumer: string): ConsumerMeters {
    const counters = new Map(
      CONSUMER_OUTCOMES.map((outcome) => {
        const counter = this.consumerMessages.labels(queue, consumer, outcome);
        counter.inc(0);
        return [outcome, counter] as const;
      }),
    );
    return { count: (outcome) => counters.get(outcome)!.inc() };
  }

  /**
   * Scrape-time series are read from `source` (the most recently attached one, when several are);
   * returns the function that detaches it.
   */
  observeDatabase(source: DatabaseSource): () => void {
    this.sources.push(source);
    return () => {
      const index = this.sources.lastIndexOf(source);
      if (index >= 0) this.sources.splice(index, 1);
    };
  }

  private databaseGauge<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (sample: DatabaseSample, set: (labels: Record<L, string>, value: number) => void) => void,
  ): void {
    const metrics = this;
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        const sample = await metrics.sample();
        if (sample) fill(sample, (labels, value) => this.set(labels, value));
      },
    });
  }

  /** One database read per scrape, shared by every database gauge (their collects start together). */
  private sample(): Promise<DatabaseSample | null> {
    const source = this.sources.at(-1);
    if (!source) return Promise.resolve(null);
    this.sampling ??= source.sample().finally(() => {
      this.sampling = undefined;
    });
    return this.sampling;
  }
}

/** The process's registry: every role, the relay, the sweepers, the consumers and the API record here. */
export const heraldMetrics = new HeraldMetrics();
