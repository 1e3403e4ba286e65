/**
 * The demo's scheduled-action part (seed 002), on the roles the demo already runs: one delayed action
 * firing, one wait unlocked by a signal, one signal that arrived before its wait was saved, and one
 * wait that expires into its "not clicked" branch. Prints each change as it happens, then the outcome
 * of each, the action_execute messages published, and one action's event history. Returns whether
 * every action reached its expected outcome, executed exactly once.
 */

import type { ExistingAction } from '../../domain/scheduled-action.js';
import type { DemoContext, DemoStep } from '../../registry/demo.js';
import { ScheduledActionService } from './service.js';
import type { ActionsConfig } from './settings.js';

interface Expected {
  label: string;
  id: string;
  branch: 'main' | 'expiry';
}

/** The scheduled-action slice's demo step. */
export const actionsDemo: DemoStep<ActionsConfig> = { run: runActionsDemo };

async function runActionsDemo({ runtime, config, out }: DemoContext<ActionsConfig>): Promise<boolean> {
  const actions = new ScheduledActionService({
    db: runtime.db,
    handler: runtime.handler,
    settings: config.actions,
  });
  const org = 'org-demo';
  const meta = { actor: 'demo' };
  const wait = (correlationKey: string, expiresSeconds: number) => ({
    organizationId: org,
    mode: 'waitForSignal' as const,
    expiresSeconds,
    wait: { names: ['clicked', 'replied'], correlationKey },
    actionType: 'send_message',
    actionConfig: { template: 'thanks-for-clicking' },
    expiry: { actionType: 'send_message', actionConfig: { template: 'resend-not-clicked' } },
    workflowId: 'wf-welcome',
    workflowNodePath: 'root/wait-for-click',
  });

  out();
  out(`scheduled actions (dispatch: ${config.actions.dispatch}):`);
  const early = await actions.signal(
    { organizationId: org, correlationKey: 'customer-3:wait-for-click', name: 'clicked' },
    meta,
  );
  out(`  signal "clicked" for customer-3 recorded before any wait exists (signal ${early.signalId})`);
  const made: Expected[] = [
    {
      label: 'follow-up in 2 s',
      branch: 'main',
      id: (
        await actions.schedule(
          {
            organizationId: org,
            mode: 'normal',
            delaySeconds: 2,
            actionType: 'send_message',
            actionConfig: { template: 'follow-up' },
          },
          meta,
        )
      ).actionId,
    },
    {
      label: 'wait, clicked after 1 s',
      branch: 'main',
      id: (await actions.schedule(wait('customer-2:wait-for-click', 60), meta)).actionId,
    },
    {
      label: 'wait, clicked before save',
      branch: 'main',
      id: (await actions.schedule(wait('customer-3:wait-for-click', 60), meta)).actionId,
    },
    {
      label: 'wait, never clicked (2 s)',
      branch: 'expiry',
      id: (await actions.schedule(wait('customer-4:wait-for-click', 2), meta)).actionId,
    },
  ];
  const line = (states: ExistingAction[]) =>
    states.map((s, i) => `${made[i]!.label.split(',')[0]!.split(' ')[0]}#${i + 1}=${s.status}`).join('  ');

  let last = '';
  let signalled = false;
  const started = Date.now();
  const deadline = started + 30_000;
  for (;;) {
    const states = await Promise.all(made.map((m) => actions.get(m.id)));
    const now = line(states);
    if (now !== last) {
      out(`  [${new Date().toISOString().slice(11, 23)}] ${now}`);
      last = now;
    }
    if (!signalled && Date.now() - started >= 1_000) {
      const outcome = await actions.signal(
        {
          organizationId: org,
          correlationKey: 'customer-2:wait-for-click',
          name: 'clicked',
          payload: { link: 'https://example.test/offer' },
        },
        meta,
      );
      out(`  signal "clicked" for customer-2 unlocked ${outcome.unlocked.length} wait(s)`);
      signalled = true;
    }
    if (states.every((s) => s.status === 'done' || s.status === 'failed' || s.status === 'cancelled')) break;
    if (Date.now() > deadline) {
      out('demo: timed out waiting for the scheduled actions');
      return false;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const { rows } = await runtime.db.query<{ action_id: string; n: number; epoch: number; template: string }>(
    `select payload->>'actionId' as action_id, count(*)::int as n, max((payload->>'epoch')::int) as epoch,
            max(payload->'actionConfig'->>'template') as template
       from outbox where destination = 'action_execute' group by 1`,
  );
  const published = new Map(rows.map((r) => [r.action_id, r]));
  out('  outcome:');
  let ok = true;
  for (const m of made) {
    const s = await actions.get(m.id);
    const message = published.get(m.id);
    const fine = s.status === 'done' && s.branch === m.branch && message?.n === 1;
    ok &&= fine;
    out(
      `    ${m.label.padEnd(27)} ${s.status}/${s.outcome ?? '-'} branch=${s.branch} trigger=${s.dueBecause}` +
        `${s.unlockedBy ? ` unlocked by ${s.unlockedBy.name}` : ''} → action_execute ×${message?.n ?? 0}` +
        ` (epoch ${message?.epoch ?? '-'}, ${message?.template ?? '-'})`,
    );
  }
  out(`  event history of "${made[2]!.label}":`);
  for (const e of await actions.history(made[2]!.id)) {
    out(
      `    v${e.version} ${e.recordedAt.toISOString().slice(11, 23)} ${e.type}${e.meta.actor ? ` by ${e.meta.actor}` : ''} ${JSON.stringify(e.data).slice(0, 140)}`,
    );
  }
  if (!ok) out('demo: a scheduled action did not reach its expected outcome');
  return ok;
}
