/**
 * processAction's ports (seed 002's EvaluateConditions / ExecuteAction interfaces, which break the
 * cycle between the scheduler and the trigger engine), each with a working default:
 * - SubjectPort loads the subject the action is for (default: the `subject` table in Herald's schema).
 * - ConditionsPort evaluates a stored `sourceConfig` again at fire time (default: JSON Logic over
 *   `{ subject, subjectId, action, signal }`; `sourceConfig.conditions` is the rule).
 * - ActionExecutor runs the action (default: nothing here — the completion publishes `action_execute`
 *   through the outbox with the claim epoch, for the trigger engine to run).
 * Every port works inside the fire transaction (`tx`): effects written there commit with the outcome.
 */
import jsonLogic from 'json-logic-js';
import { loadSubject } from '../../adapters/postgres/scheduled-action-queries.js';
import type { ExistingAction } from '../../domain/scheduled-action.js';
import { errorMessage, PermanentError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';
import { branchAction } from './descriptor.js';

export interface Subject {
  subjectId: string;
  attributes: Record<string, unknown>;
}

export interface SubjectPort {
  load(organizationId: string, subjectId: string, tx: SqlClient): Promise<Subject | null>;
}

export interface ConditionsVerdict {
  holds: boolean;
  /** Why not, recorded as the cancellation reason. */
  reason?: string;
}

export interface ConditionsPort {
  evaluate(
    sourceConfig: Readonly<Record<string, unknown>>,
    data: Record<string, unknown>,
  ): ConditionsVerdict | Promise<ConditionsVerdict>;
}

export interface ExecutionContext {
  action: ExistingAction;
  /** The branch's action type and config. */
  actionType: string;
  actionConfig: Record<string, unknown>;
  subject: Subject | null;
  tx: SqlClient;
}

export interface ActionExecutor {
  /**
   * Runs the action. `published: true` has the completion publish `action_execute` (the default);
   * an executor that did the work itself returns false. PermanentError fails the action; any other
   * throw is retried with backoff up to the action's maxRetries.
   */
  execute(context: ExecutionContext): Promise<{ published: boolean }>;
}

export interface ActionPorts {
  subjects: SubjectPort;
  conditions: ConditionsPort;
  executor: ActionExecutor;
}

export const subjectTable: SubjectPort = {
  async load(organizationId, subjectId, tx) {
    const found = await loadSubject(tx, organizationId, subjectId);
    return found ? { subjectId, attributes: found.attributes } : null;
  },
};

const RULE_EXCERPT = 300;

/** JSON Logic (jsonlogic.com): `sourceConfig.conditions` must be truthy for the action to run. */
export const jsonLogicConditions: ConditionsPort = {
  evaluate(sourceConfig, data) {
    const rule = sourceConfig.conditions;
    if (rule === undefined || rule === null) return { holds: true };
    let result: unknown;
    try {
      result = jsonLogic.apply(rule as jsonLogic.RulesLogic, data);
    } catch (error) {
      throw new PermanentError(`sourceConfig.conditions cannot be evaluated: ${errorMessage(error)}`);
    }
    if (jsonLogic.truthy(result)) return { holds: true };
    const excerpt = JSON.stringify(rule).slice(0, RULE_EXCERPT);
    return { holds: false, reason: `conditions no longer hold at fire time: ${excerpt}` };
  },
};

export const publishingExecutor: ActionExecutor = {
  execute: async () => ({ published: true }),
};

export const defaultActionPorts: ActionPorts = {
  subjects: subjectTable,
  conditions: jsonLogicConditions,
  executor: publishingExecutor,
};

export type ProcessOutcome = { kind: 'executed'; published: boolean } | { kind: 'cancelled'; reason: string };

/** Seed 002's processAction for a claimed action: subject, re-evaluated conditions, then the executor. */
export async function processAction(
  action: ExistingAction,
  tx: SqlClient,
  ports: ActionPorts,
): Promise<ProcessOutcome> {
  const subject = action.subjectId
    ? await ports.subjects.load(action.organizationId, action.subjectId, tx)
    : null;
  const { actionType, actionConfig } = branchAction(action);
  if (action.sourceConfig) {
    const verdict = await ports.conditions.evaluate(action.sourceConfig, {
      subject: subject?.attributes ?? null,
      subjectId: action.subjectId,
      action: {
        actionType,
        actionConfig,
        workflowId: action.workflowId,
        workflowNodePath: action.workflowNodePath,
      },
      signal: action.unlockedBy,
    });
    if (!verdict.holds)
      return { kind: 'cancelled', reason: verdict.reason ?? 'conditions no longer hold at fire time' };
  }
  const { published } = await ports.executor.execute({ action, actionType, actionConfig, subject, tx });
  return { kind: 'executed', published };
}
