/**
 * `herald actions`: operating scheduled actions from a shell (list, show, schedule, signal, cancel, fire,
 * reschedule, subject). Every change goes through the library, one command and one transaction
 * (invariant 1) with the operator as actor (--actor, default cli:<pod>), and prints the resulting state.
 * Exit codes: 0 done, 1 refused (the message says why), 2 usage. ADR 0010.
 */

import {
  json,
  ORGANIZATION_OPTION,
  oneShot,
  out,
  parse,
  servicesOn,
  UsageError,
} from '../../cli/one-shot.js';
import { ACTION_STATUSES, type ActionStatus, type ExistingAction } from '../../domain/scheduled-action.js';
import type { Database } from '../../ports/database.js';
import { parseInstant } from '../../projections/replay.js';
import type { Role, RoleContext } from '../../registry/role.js';
import type { ActionServices } from './routes.js';
import type { ActionsConfig } from './settings.js';

// Every subcommand also takes --actor <name> (recorded on its events) and --json.
const USAGE = [
  'herald actions list [--organization <id>] [--status <status>] [--workflow <id>] [--limit <n>]',
  'show <id>',
  'schedule <JSON>',
  'signal --organization <id> --correlation <key> --name <signal> [--payload <JSON>]',
  'cancel <id> --reason <text>',
  'fire <id> [--reason <text>]',
  'reschedule <id> (--execute-at <time> | --expires-at <time>) [--reason <text>]',
  'subject <organization> <subject> [--set <JSON>]',
].join(' | ');

const OPTIONS = {
  ...ORGANIZATION_OPTION,
  status: { type: 'string' },
  workflow: { type: 'string' },
  limit: { type: 'string' },
  correlation: { type: 'string' },
  name: { type: 'string' },
  payload: { type: 'string' },
  reason: { type: 'string' },
  'execute-at': { type: 'string' },
  'expires-at': { type: 'string' },
  set: { type: 'string' },
  actor: { type: 'string' },
  json: { type: 'boolean' },
} as const;

function parseJson(text: string | undefined, option: string): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new UsageError(`${option} must be a JSON object`);
}

function required(value: string | undefined, what: string): string {
  if (!value) throw new UsageError(`${what} is required`);
  return value;
}

const time = (iso: string | null) => iso ?? '-';

function summary(a: ExistingAction): string {
  const due = a.status === 'pending' ? ` due ${a.executeAt}` : '';
  const wait = a.wait
    ? ` waits for ${a.wait.names.join('|')} on ${a.wait.correlationKey} until ${a.expiresAt}`
    : '';
  return `${a.actionId} ${a.status}${a.outcome ? `/${a.outcome}` : ''} ${a.organizationId} ${a.actionType}${due}${wait}`;
}

function printAction(a: ExistingAction): void {
  out(summary(a));
  const rows: [string, unknown][] = [
    ['mode', a.mode],
    ['execute at', time(a.executeAt)],
    ['expires at', time(a.expiresAt)],
    [
      'unlocked by',
      a.unlockedBy ? `${a.unlockedBy.name} ${a.unlockedBy.signalId} at ${a.unlockedBy.receivedAt}` : '-',
    ],
    ['branch', a.branch ?? '-'],
    ['claim epoch', a.claimEpoch],
    ['retries', `${a.retryCount} of ${a.maxRetries}`],
    ['last error', a.lastError ?? '-'],
    ['cancel reason', a.cancelReason ?? '-'],
    ['workflow', a.workflowId ? `${a.workflowId} ${a.workflowNodePath ?? ''}` : '-'],
    ['subject', a.subjectId ?? '-'],
    ['config', JSON.stringify(a.actionConfig)],
    ['expiry', a.expiry ? JSON.stringify(a.expiry) : '-'],
  ];
  for (const [label, value] of rows) out(`  ${label.padEnd(14)} ${value}`);
}

async function actionsCommand(context: RoleContext, db: Database): Promise<number> {
  const { values, positionals } = parse(context.argv, OPTIONS);
  const [sub, ...rest] = positionals;
  const { actions: service } = servicesOn<ActionServices>(context, db);
  const meta = { actor: values.actor ?? `cli:${context.config.pod}` };
  const show = (state: ExistingAction) => {
    if (values.json) out(json(state));
    else printAction(state);
    return 0;
  };
  switch (sub) {
    case 'list': {
      const status = values.status as ActionStatus | undefined;
      if (status && !ACTION_STATUSES.includes(status)) {
        throw new UsageError(`--status must be one of ${ACTION_STATUSES.join(', ')}`);
      }
      const limit = values.limit === undefined ? 100 : Number(values.limit);
      if (!Number.isInteger(limit) || limit < 1) throw new UsageError('--limit must be a positive integer');
      const actions = await service.list({
        ...(values.organization ? { organizationId: values.organization } : {}),
        ...(status ? { status } : {}),
        ...(values.workflow ? { workflowId: values.workflow } : {}),
        limit,
      });
      if (values.json) out(json(actions));
      else for (const a of actions) out(summary(a));
      return 0;
    }
    case 'show': {
      const id = required(rest[0], 'the action id');
      const state = await service.get(id);
      if (values.json) {
        out(json({ state, history: await service.history(id) }));
        return 0;
      }
      printAction(state);
      out('history:');
      for (const e of await service.history(id)) {
        out(
          `  v${e.version} ${e.recordedAt.toISOString()} ${e.type}${e.meta.actor ? ` by ${e.meta.actor}` : ''} ${JSON.stringify(e.data)}`,
        );
      }
      return 0;
    }
    case 'schedule': {
      const params = parseJson(required(rest[0], 'the parameters (a JSON object)'), 'the parameters');
      return show(await service.schedule(params as never, meta));
    }
    case 'signal': {
      const outcome = await service.signal(
        {
          organizationId: required(values.organization, '--organization'),
          correlationKey: required(values.correlation, '--correlation'),
          name: required(values.name, '--name'),
          ...(values.payload ? { payload: parseJson(values.payload, '--payload') } : {}),
        },
        meta,
      );
      if (values.json) out(json(outcome));
      else {
        out(`signal ${outcome.signalId}: unlocked ${outcome.unlocked.length} wait(s)`);
        for (const id of outcome.unlocked) out(`  unlocked ${id}`);
        for (const r of outcome.refused) out(`  refused  ${r.actionId}: ${r.reason}`);
      }
      return 0;
    }
    case 'cancel':
      return show(
        await service.cancel(required(rest[0], 'the action id'), required(values.reason, '--reason'), meta),
      );
    case 'fire':
      return show(await service.fireNow(required(rest[0], 'the action id'), values.reason, meta));
    case 'reschedule': {
      const id = required(rest[0], 'the action id');
      const executeAt = values['execute-at'];
      const expiresAt = values['expires-at'];
      if ((executeAt === undefined) === (expiresAt === undefined)) {
        throw new UsageError(
          'give exactly one of --execute-at (a pending action) or --expires-at (a waiting one)',
        );
      }
      const to = executeAt
        ? { executeAt: parseInstant(executeAt, '--execute-at') }
        : { expiresAt: parseInstant(expiresAt!, '--expires-at') };
      return show(await service.reschedule(id, to, values.reason, meta));
    }
    case 'subject': {
      const organization = required(rest[0], 'the organization');
      const subject = required(rest[1], 'the subject id');
      const attributes = parseJson(values.set, '--set');
      const record = attributes
        ? await service.upsertSubject(organization, subject, attributes)
        : await service.getSubject(organization, subject);
      out(
        values.json
          ? json(record)
          : `${organization}/${subject} ${JSON.stringify(record.attributes)} (updated ${record.updatedAt})`,
      );
      return 0;
    }
    default:
      throw new UsageError(sub ? `unknown subcommand '${sub}'` : 'a subcommand is required');
  }
}

export const actionRoles: Record<string, Role<ActionsConfig>> = {
  actions: {
    summary: 'scheduled actions: list | show | schedule | signal | cancel | fire | reschedule | subject',
    usage: USAGE,
    run: oneShot(USAGE, actionsCommand),
  },
};
