/**
 * `herald campaigns …`, `herald billing …` and `herald sms-simulator`: a campaign from the command line
 * (show, recipients, pause, resume, cancel, reschedule, resend with --dry-run), with an SMS campaign's
 * counters (kept on the campaign in the transactions that change its recipient rows, never counted on
 * read), its money and money check and its CSV build; credits and balances of the default ledger (a credit
 * is applied once per --key); and the operator-network test double. ADR 0014, ADR 0019.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { listRecipients, loadUpload } from '../../adapters/postgres/sms-queries.js';
import { json, oneShot, out, parse, servicesOn, UsageError } from '../../cli/one-shot.js';
import { describeLineContent, type LineMessage } from '../../domain/campaign/line.js';
import { CAST_TYPES, type CastType } from '../../domain/campaign/status.js';
import type { CampaignOperation, ExistingCampaign } from '../../domain/campaign.js';
import { NotFoundError } from '../../errors.js';
import type { Database } from '../../ports/database.js';
import type { Role, RoleContext, RoleDefinition } from '../../registry/role.js';
import { runRole } from '../../roles/runtime.js';
import { campaignAggregate } from './descriptor.js';
import type { CampaignServices } from './routes.js';
import type { CampaignConfig } from './settings.js';
import { PostgresLedger } from './sms/billing.js';
import { smsGatewayRole } from './sms/gateway/gateway.js';
import { checkCampaignMoney, type MoneyCheck } from './sms/money-check.js';
import { smsSimulatorRole } from './sms/simulator.js';
import { SMPP_USAGE, smscSimulatorCommand } from './sms/smsc-simulator.js';

const USAGE =
  'herald campaigns show <id> [--json] | recipients <id> [--after <id>] [--limit <n>] [--json] | ' +
  'pause|resume|cancel <id> [--reason <text>] | reschedule <id> <time> [--reason <text>] | ' +
  'resend <id> [--dry-run] [--reason <text>] | ' +
  'edit <id> [--name <text>] [--cast-type broadcast|multicast|narrowcast] [--audience <id>] [--oa <id>] [--messages-file <json>]';

const OPTIONS = {
  json: { type: 'boolean' },
  after: { type: 'string' },
  limit: { type: 'string' },
  reason: { type: 'string' },
  'dry-run': { type: 'boolean' },
  name: { type: 'string' },
  'cast-type': { type: 'string' },
  audience: { type: 'string' },
  oa: { type: 'string' },
  'messages-file': { type: 'string' },
} as const;

/** The operator commands the CLI offers: names of the campaign's operation catalogue. */
const CONTROLS: readonly string[] = [
  'pause',
  'resume',
  'cancel',
  'reschedule',
  'resend',
  'edit',
] satisfies CampaignOperation[];

/** The lines `herald campaigns show` prints for a campaign. */
export function describeCampaign(
  c: ExistingCampaign,
  upload?: Awaited<ReturnType<typeof loadUpload>>,
  money?: MoneyCheck | null,
): string[] {
  const lines = [
    `campaign ${c.campaignId}  "${c.name}"  ${c.channel}  ${c.status}${c.deletedAt ? ' (deleted)' : ''}  epoch ${c.claimEpoch}`,
    `  organization ${c.organizationId}; created ${c.createdAt}; start ${c.startAt ?? 'at once'}; status since ${c.statusChangedAt}`,
  ];
  if (c.failureReason) lines.push(`  failed: ${c.failureReason}`);
  if (c.pausedFrom) lines.push(`  paused from ${c.pausedFrom}${c.pauseReason ? `: ${c.pauseReason}` : ''}`);
  if (c.dispatchDeadline) lines.push(`  dispatch deadline ${c.dispatchDeadline}`);
  const s = c.sms;
  if (!s) {
    if (c.channel === 'line') lines.push(...describeLine(c));
    return lines;
  }
  lines.push(
    `  ${s.messageType} lang=${s.lang}${s.operatorCampaignId ? ` campaignId=${s.operatorCampaignId}` : ''} ${s.templateType} (${s.source}): ${JSON.stringify(s.template)}`,
  );
  if (s.sendWindow)
    lines.push(
      `  send window ${s.sendWindow.start}-${s.sendWindow.end} recipient local time${s.sendWindow.days ? ` (per weekday: ${JSON.stringify(s.sendWindow.days)})` : ''}`,
    );
  lines.push(
    `  recipients ${s.recipients} (rejected ${s.rejected}), segments ${s.segments}, total cost ${s.totalCost}; ` +
      (s.chargeKey ? `charged ${s.chargeKey} at ${s.chargedAt}` : 'not charged'),
  );
  const p = s.progress;
  lines.push(
    `  progress: pending ${p.pending}, deferred ${p.deferred}, submitted ${p.submitted}, retry pending ${p.retryPending}, ` +
      `delivered ${p.delivered}, failed ${p.failed} (unconfirmed ${p.unconfirmed}, refunded ${p.refunded}), cancelled ${p.cancelled}` +
      ` (deferrals ${s.deferrals}, submissions ${s.submissions})`,
  );
  lines.push(
    `  money: total ${s.totalCost}, actual ${s.actualCost}, refunded ${s.refundedCost}, unconfirmed ${s.unconfirmedCost}, ` +
      `cancelled ${s.cancelledCost}, failed ${s.failedCost}; resend attempt ${c.resendAttempt}`,
  );
  if (s.autoPause)
    lines.push(
      `  auto-pause: more than ${Number((s.autoPause.maxFailureRate * 100).toFixed(2))}% failed over the last ${s.autoPause.window} reports`,
    );
  if (s.withdrawal) {
    const w = s.withdrawal;
    lines.push(
      `  withdrawal (${w.reason}): ${w.recipients} unsent recipients, ${w.amount}, key ${w.key}, ` +
        (w.refundedAt ? `refunded at ${w.refundedAt}` : 'refund owed'),
    );
  }
  if (upload) {
    const reasons = Object.entries(upload.rejectedByReason)
      .map(([reason, n]) => `${reason} ${n}`)
      .join(', ');
    lines.push(
      `  upload ${upload.fileName ?? upload.id}: ${upload.status}, ${upload.sizeBytes} bytes, ${upload.rowsRead} rows read, ` +
        `accepted ${upload.acceptedCount}, rejected ${upload.rejectedCount}${reasons ? ` (${reasons})` : ''}, build attempt ${upload.attempt}` +
        (upload.error ? `; ${upload.error}` : ''),
    );
  }
  if (money) {
    lines.push(
      `  money check: charged ${money.charged} = delivered ${money.delivered} + refunded ${money.refunded} + unconfirmed ${money.unconfirmed}` +
        ` + outstanding ${money.outstanding}: ${money.balanced ? 'balanced' : money.problems.join('; ') || 'not settled yet'}`,
    );
  }
  return lines;
}

/** A LINE campaign's target, content and delivery progress (each chunk's LINE request id is in its events). */
function describeLine(c: ExistingCampaign): string[] {
  const to =
    c.castType === 'broadcast'
      ? 'every friend'
      : c.castType === 'narrowcast'
        ? `audience group ${c.audienceId}`
        : `audience ${c.audienceId}`;
  const lines = [`  line ${c.castType} from ${c.lineOaId} to ${to}`];
  if (!c.line) return lines;
  lines.push(`  messages (${c.line.messages.length}): ${describeLineContent(c.line.messages)}`);
  const { plan, progress: p } = c.line;
  if (!plan) {
    lines.push('  delivery: not planned yet (planned at the first delivery attempt)');
    return lines;
  }
  const failed =
    plan.recipients === null
      ? ''
      : `, not delivered ${plan.recipients - p.recipientsAccepted - p.recipientsUnconfirmed}`;
  lines.push(
    `  delivery: chunks ${p.chunksDone}/${plan.chunks} done (accepted ${p.chunksAccepted}, unconfirmed ${p.chunksUnconfirmed}); ` +
      `recipients accepted ${p.recipientsAccepted}${plan.recipients === null ? '' : `/${plan.recipients}`}, unconfirmed ${p.recipientsUnconfirmed}${failed}; ` +
      `409 duplicates ${p.duplicates}, failed calls ${p.failedCalls}; retry keys of plan epoch ${plan.epoch} (planned ${plan.plannedAt})`,
  );
  if (p.lastRequestId) lines.push(`  last x-line-request-id ${p.lastRequestId}`);
  if (p.lastError) {
    const e = p.lastError;
    lines.push(
      `  last LINE error: ${e.kind}${e.status ? ` ${e.status}` : ''}: ${e.message}${e.requestId ? ` (${e.requestId})` : ''}`,
    );
  }
  return lines;
}

/** `herald campaigns edit`: the CMS edit of a DRAFT or SCHEDULED campaign. */
async function editCampaign(
  generic: CampaignServices['campaigns'],
  id: string,
  values: Record<string, string | boolean | undefined>,
  meta: { actor: string; correlationId: string },
) {
  const castType = values['cast-type'];
  if (castType !== undefined && !CAST_TYPES.includes(castType as CastType)) {
    throw new UsageError(`--cast-type must be one of ${CAST_TYPES.join(', ')}`);
  }
  let messages: unknown;
  if (typeof values['messages-file'] === 'string') {
    try {
      messages = JSON.parse(readFileSync(values['messages-file'], 'utf8'));
    } catch (error) {
      throw new UsageError(`--messages-file: ${(error as Error).message}`);
    }
  }
  return generic.edit(
    id,
    {
      ...(typeof values.name === 'string' ? { name: values.name } : {}),
      ...(castType !== undefined ? { castType: castType as CastType } : {}),
      ...(typeof values.audience === 'string' ? { audienceId: values.audience } : {}),
      ...(typeof values.oa === 'string' ? { lineOaId: values.oa } : {}),
      ...(messages !== undefined ? { messages: messages as LineMessage[] } : {}),
    },
    meta,
  );
}

/** `herald campaigns pause|resume|cancel|reschedule|resend`: the SMS controls, or the generic commands for LINE. */
async function control(
  db: Database,
  context: RoleContext,
  sub: string,
  campaign: ExistingCampaign,
  rest: string[],
  values: {
    reason?: string | undefined;
    'dry-run'?: boolean | undefined;
    json?: boolean | undefined;
  } & Record<string, string | boolean | undefined>,
): Promise<number> {
  const { sms, campaigns: generic } = servicesOn<CampaignServices>(context, db);
  const meta = { actor: 'cli', correlationId: randomUUID() };
  const id = campaign.campaignId;
  const reason = values.reason;
  const isSms = campaign.channel === 'sms' && campaign.sms !== null;
  const show = (state: ExistingCampaign, what: string) => {
    if (values.json) out(json(state));
    else {
      out(`${what}: ${state.status}`);
      for (const line of describeCampaign(state)) out(line);
    }
    return 0;
  };
  switch (sub) {
    case 'pause':
      return show(await generic.pause(id, reason, meta), 'paused');
    case 'resume':
      return show(await generic.resume(id, reason, meta), 'resumed');
    case 'cancel': {
      const state = await generic.cancel(id, reason, meta);
      return show(
        state,
        isSms && state.status === 'CANCELLING'
          ? 'cancelling (the scanner withdraws and refunds the unsent recipients, then CANCELLED)'
          : 'cancelled',
      );
    }
    case 'reschedule': {
      const [time] = rest;
      if (!time) throw new UsageError('expected reschedule <id> <time>');
      const state = isSms
        ? await sms.reschedule(id, { scheduledAt: time, ...(reason ? { reason } : {}) }, { meta })
        : await generic.reschedule(id, time, undefined, meta);
      return show(state, `rescheduled to ${state.startAt}`);
    }
    case 'edit':
      return show(await editCampaign(generic, id, values, meta), 'edited');
    case 'resend': {
      if (!isSms) {
        if (values['dry-run']) throw new UsageError('--dry-run previews an SMS resend');
        return show(
          await generic.resend(id, reason, meta),
          'resent (the chunks not yet accepted, same retry keys)',
        );
      }
      const preview = await sms.resendPreview(id);
      if (values['dry-run']) {
        if (values.json) out(json(preview));
        else
          out(
            `resend ${preview.nextResendAttempt} of ${id} would send ${preview.recipients} failed recipients for ${preview.cost} ` +
              `(key ${preview.chargeKey}); refunds pending ${preview.refundsPending}`,
          );
        return 0;
      }
      const result = await sms.resend(id, reason ? { reason } : {}, {
        organizationId: campaign.organizationId,
        meta,
      });
      return show(
        result.body,
        `resend ${preview.nextResendAttempt}: ${preview.recipients} recipients charged ${preview.cost}`,
      );
    }
    default:
      throw new UsageError(`unknown command ${sub}`);
  }
}

const campaignsCommand: Role['run'] = oneShot(USAGE, async (context, db) => {
  const { argv } = context;
  const { positionals, values } = parse(argv, OPTIONS);
  const [sub, id, ...rest] = positionals;
  if (!sub || !id || !['show', 'recipients', ...CONTROLS].includes(sub))
    throw new UsageError(`expected show|recipients|${CONTROLS.join('|')} <id>`);
  const loaded = await campaignAggregate.store.load(db, id);
  if (!loaded || loaded.state.status === 'NONE') throw new NotFoundError(`campaign ${id} not found`);
  const campaign = loaded.state;
  if (CONTROLS.includes(sub)) return control(db, context, sub, campaign, rest, values);
  if (sub === 'show') {
    const upload = campaign.sms?.source === 'csv' ? await loadUpload(db, campaign.campaignId) : null;
    // With an external billing service (HERALD_BILLING=http) the ledger side is that service's: Herald's
    // own ledger tables are empty, so the check would only report false differences.
    const billing = (context.config as CampaignConfig).billing;
    const external = billing?.mode === 'http';
    const money = campaign.sms && !external ? await checkCampaignMoney(db, campaign.campaignId) : null;
    if (values.json) out(json({ campaign, upload, money }));
    else {
      for (const line of describeCampaign(campaign, upload, money)) out(line);
      if (campaign.sms && external) {
        out(
          `  money check: not run here (HERALD_BILLING=http): compare the billing service's entries under ` +
            `campaign:${campaign.campaignId}[:resend:n], cancel:/expire:${campaign.campaignId}:n and recipient:<id>:n with the money above`,
        );
      }
    }
    return 0;
  }
  const limit = values.limit === undefined ? 50 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1_000) throw new UsageError('--limit must be 1..1000');
  const rows = await listRecipients(db, campaign.campaignId, {
    limit,
    ...(values.after ? { after: values.after } : {}),
  });
  if (values.json) out(json(rows));
  else {
    for (const r of rows) {
      const next = r.nextAllowedAt ? ` next ${r.nextAllowedAt.toISOString()}` : '';
      const submitted = r.submissionId
        ? ` submission ${r.submissionId} at ${r.submittedAt?.toISOString()}`
        : '';
      out(
        `${r.id}  ${r.msisdn}  ${r.operator}  ${r.status}${next}  ${r.segments}×${r.rate}=${r.cost}  attempts ${r.attempts} deferrals ${r.deferrals}${submitted}  ${JSON.stringify(r.content)}`,
      );
    }
  }
  return 0;
});

const BILLING_USAGE = 'herald billing credit <organization> <amount> --key <key> | balance <organization>';

const billingCommand: Role['run'] = oneShot(BILLING_USAGE, async ({ argv, config }, db) => {
  const { positionals, values } = parse(argv, { key: { type: 'string' }, reason: { type: 'string' } });
  const billing = (config as CampaignConfig).billing;
  if (billing?.mode === 'http') {
    throw new UsageError(
      `HERALD_BILLING=http: credits and balances are kept by the billing service at ${billing.http?.url}, not in Herald's ledger`,
    );
  }
  const [sub, organizationId, amount] = positionals;
  const ledger = new PostgresLedger(db);
  if (sub === 'credit' && organizationId && amount) {
    if (!values.key) throw new UsageError('--key is required (a credit is applied once per key)');
    const receipt = await ledger.credit({
      organizationId,
      key: values.key,
      amount,
      ...(values.reason ? { reason: values.reason } : {}),
    });
    out(
      `${receipt.applied ? 'credited' : 'already credited'} ${receipt.amount} to ${organizationId} (key ${receipt.key}): balance ${receipt.balanceAfter}`,
    );
    return 0;
  }
  if (sub === 'balance' && organizationId) {
    const totals = await ledger.totals(organizationId);
    if (!totals) throw new NotFoundError(`organization ${organizationId} has no billing account`);
    out(
      `${organizationId}: balance ${totals.balance} = credits ${totals.credits} − deductions ${totals.deductions} + refunds ${totals.refunds} (${totals.entries} entries)`,
    );
    return 0;
  }
  throw new UsageError('expected credit <organization> <amount> --key <key> or balance <organization>');
});

export const campaignRoles: Record<string, Role<CampaignConfig>> = {
  billing: {
    summary:
      'the PostgreSQL billing ledger (HERALD_BILLING=ledger): credit <org> <amount> --key <key> | balance <org>',
    usage: BILLING_USAGE,
    run: billingCommand,
  },
  campaigns: {
    summary:
      'campaigns: show <id> (status, SMS counters, money, build, LINE progress) | recipients <id> | pause|resume|cancel|reschedule|resend|edit <id>',
    usage: USAGE,
    run: campaignsCommand,
  },
  'sms-simulator': {
    summary: `${smsSimulatorRole.summary}; --smpp: an SMPP 3.4 SMSC for \`herald sms-gateway\` [--port <p>] [--account <id>:<password>] [--tps <n>] [--received-file <path>]`,
    usage: `herald sms-simulator | ${SMPP_USAGE}`,
    async run({ argv, config, logger, registry, signal }) {
      if (argv.includes('--smpp')) {
        const gateway = config.smsGateway;
        return smscSimulatorCommand({
          argv,
          logger: logger.child({ role: 'sms-simulator' }),
          signal,
          behaviour: config.sms.simulator,
          defaultAccounts: new Map((gateway?.smscs ?? []).map((s) => [s.systemId, s.password])),
        });
      }
      await runRole('sms-simulator', smsSimulatorRole, { config, logger, registry, signal });
      return 0;
    },
  },
  'sms-gateway': {
    summary: smsGatewayRole.summary,
    async run({ config, logger, registry, signal }) {
      await runRole('sms-gateway', smsGatewayRole as RoleDefinition, { config, logger, registry, signal });
      return 0;
    },
  },
};
