/**
 * --trace for the consumer benchmark: a Database wrapper (bench only) that times every transaction a
 * consumer runs, phase by phase: waiting for a pooled connection plus BEGIN, each statement (named
 * after the query constant it is), the consumer's own JavaScript between statements, and COMMIT plus
 * the release. Statement names come from the production query constants, so a statement the fenced
 * path stops (or starts) running shows up as such. The LINE delivery's own steps (its plan and each
 * chunk, recorded as LINE answers) commit on other connections while the inbox transaction is open:
 * they, and the LINE call, are inside its "consumer JS between statements" phase.
 */
import {
  SELECT_CAMPAIGN,
  SELECT_CAMPAIGN_FOR_UPDATE,
  UPDATE_CAMPAIGNS,
} from '../../src/adapters/postgres/campaign-queries.js';
import { APPEND_EVENTS } from '../../src/adapters/postgres/event-queries.js';
import { CLAIM_INBOX, MARK_DISCARDED } from '../../src/adapters/postgres/inbox-queries.js';
import type { Database, QueryResult, SqlClient, TransactionOptions } from '../../src/ports/database.js';

const NAMES = new Map<string, string>([
  [CLAIM_INBOX, 'inbox claim (insert … on conflict)'],
  [SELECT_CAMPAIGN, 'load campaign (re-check)'],
  ['select now() as now', 'select now()'],
  [SELECT_CAMPAIGN_FOR_UPDATE, 'load campaign for update'],
  [APPEND_EVENTS, 'append event'],
  [UPDATE_CAMPAIGNS, 'update campaign row'],
  [MARK_DISCARDED, 'mark inbox discarded'],
]);

export function statementName(text: string): string {
  const known = NAMES.get(text);
  if (known) return known;
  if (/^\s*savepoint /i.test(text)) return 'savepoint';
  if (/^\s*rollback to savepoint /i.test(text)) return 'rollback to savepoint';
  return text.trim().split(/\s+/).slice(0, 5).join(' ');
}

export interface PhaseTotals {
  count: number;
  totalMs: number;
}

/** Phases in the order a transaction runs them (statements in first-seen order). */
export type TraceReport = { transactions: number; statements: number; phases: [string, PhaseTotals][] };

export const BEGIN_PHASE = 'wait for a pooled connection + BEGIN';
export const COMMIT_PHASE = 'COMMIT + release';
export const JS_PHASE = 'consumer JS between statements';
export const TOTAL_PHASE = 'transaction, end to end';

export class TransactionTracer {
  private transactions = 0;
  private statements = 0;
  private readonly phases = new Map<string, PhaseTotals>([[BEGIN_PHASE, { count: 0, totalMs: 0 }]]);

  add(phase: string, ms: number): void {
    const totals = this.phases.get(phase) ?? { count: 0, totalMs: 0 };
    totals.count++;
    totals.totalMs += ms;
    this.phases.set(phase, totals);
  }

  /** Times BEGIN, one statement and COMMIT of a raw transaction (the baseline's). */
  countTransaction(statements: number): void {
    this.transactions++;
    this.statements += statements;
  }

  report(): TraceReport {
    // Keep the fixed phases at the ends: BEGIN first, then statements, JS, COMMIT, total.
    const tail = [JS_PHASE, COMMIT_PHASE, TOTAL_PHASE];
    const entries = [...this.phases].filter(([name]) => !tail.includes(name));
    for (const name of tail) {
      const totals = this.phases.get(name);
      if (totals) entries.push([name, totals]);
    }
    return { transactions: this.transactions, statements: this.statements, phases: entries };
  }

  /** The same database, every transaction timed. Queries outside transactions are not traced. */
  wrap(db: Database): Database {
    return {
      schema: db.schema,
      query: <Row>(text: string, values?: readonly unknown[]) => db.query<Row>(text, values),
      close: () => db.close(),
      transaction: async <T>(work: (tx: SqlClient) => Promise<T>, options?: TransactionOptions) => {
        const called = performance.now();
        let began = called;
        let worked = called;
        let inStatements = 0;
        let statements = 0;
        const result = await db.transaction(async (tx) => {
          began = performance.now();
          inStatements = 0;
          statements = 0;
          const traced: SqlClient = {
            query: async <Row>(text: string, values?: readonly unknown[]): Promise<QueryResult<Row>> => {
              const started = performance.now();
              try {
                return await tx.query<Row>(text, values);
              } finally {
                const ms = performance.now() - started;
                inStatements += ms;
                statements++;
                this.add(statementName(text), ms);
              }
            },
          };
          try {
            return await work(traced);
          } finally {
            worked = performance.now();
          }
        }, options);
        const done = performance.now();
        this.add(BEGIN_PHASE, began - called);
        this.add(JS_PHASE, worked - began - inStatements);
        this.add(COMMIT_PHASE, done - worked);
        this.add(TOTAL_PHASE, done - called);
        this.countTransaction(statements + 2);
        return result;
      },
    };
  }
}
