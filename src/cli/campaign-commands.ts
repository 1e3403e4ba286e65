/**
 * `herald campaigns …` and `herald sms-simulator`: a campaign from the command line, with an SMS
 * campaign's counters (kept on the campaign in the same transactions as its recipient rows, never
 * counted on read), its charge and its CSV build; and the operator-network test double.
 *
 *   herald campaigns show <id> [--json]
 *   herald campaigns recipients <id> [--after <recipient id>] [--limit <n>] [--json]
 *   herald billing credit <organization> <amount> --key <key>   (the default ledger: a top-up, once per key)
 *   herald billing balance <organization>
 *   herald sms-simulator
 */
import { listRecipients, loadUpload } from '../adapters/postgres/sms-queries.js';
import { campaignAggregate } from '../aggregates/campaign/descriptor.js';
import { PostgresLedger } from '../aggregates/campaign/sms/billing.js';
import { smsSimulatorRole } from '../aggregates/campaign/sms/simulator.js';
import type { ExistingCampaign } from '../domain/campaign.js';
import { NotFoundError } from '../errors.js';
import { runRole } from '../runtime/runtime.js';
import { json, oneShot, out, parse, UsageError } from './one-shot.js';
import type { Role } from './role.js';

const USAGE = 'herald campaigns show <id> [--json] | recipients <id> [--after <id>] [--limit <n>] [--json]';

const OPTIONS = {
  json: { type: 'boolean' },
  after: { type: 'string' },
  limit: { type: 'string' },
} as const;

/** The lines `herald campaigns show` prints for a campaign. */
export function describeCampaign(
  c: ExistingCampaign,
  upload?: Awaited<ReturnType<typeof loadUpload>>,
): string[] {
  const lines = [
    `campaign ${c.campaignId}  "${c.name}"  ${c.channel}  ${c.status}${c.deletedAt ? ' (deleted)' : ''}  epoch ${c.claimEpoch}`,
    `  organization ${c.organizationId}; created ${c.createdAt}; start ${c.startAt ?? 'at once'}; status since ${c.statusChangedAt}`,
  ];
  if (c.failureReason) lines.push(`  failed: ${c.failureReason}`);
  if (c.pausedFrom) lines.push(`  paused from ${c.pausedFrom}`);
  const s = c.sms;
  if (!s) {
    if (c.channel === 'line')
      lines.push(`  line ${c.castType} from ${c.lineOaId} to ${c.audienceId ?? 'every friend'}`);
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
    `  progress: pending ${p.pending}, deferred ${p.deferred}, submitted ${p.submitted}, delivered ${p.delivered}, failed ${p.failed}, refunded ${p.refunded}` +
      ` (deferrals ${s.deferrals}, submissions ${s.submissions})`,
  );
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
  return lines;
}

const campaignsCommand: Role['run'] = oneShot(USAGE, async ({ argv }, db) => {
  const { positionals, values } = parse(argv, OPTIONS);
  const [sub, id] = positionals;
  if (!sub || !id || !['show', 'recipients'].includes(sub))
    throw new UsageError('expected show <id> or recipients <id>');
  const loaded = await campaignAggregate.store.load(db, id);
  if (!loaded || loaded.state.status === 'NONE') throw new NotFoundError(`campaign ${id} not found`);
  const campaign = loaded.state;
  if (sub === 'show') {
    const upload = campaign.sms?.source === 'csv' ? await loadUpload(db, campaign.campaignId) : null;
    if (values.json) out(json({ campaign, upload }));
    else for (const line of describeCampaign(campaign, upload)) out(line);
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

const billingCommand: Role['run'] = oneShot(BILLING_USAGE, async ({ argv }, db) => {
  const { positionals, values } = parse(argv, { key: { type: 'string' }, reason: { type: 'string' } });
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

export const campaignRoles: Record<string, Role> = {
  billing: {
    summary: 'the default billing ledger: credit <org> <amount> --key <key> | balance <org>',
    run: billingCommand,
  },
  campaigns: {
    summary: 'campaigns: show <id> (status, SMS counters, charge, build) | recipients <id>',
    run: campaignsCommand,
  },
  'sms-simulator': {
    summary: smsSimulatorRole.summary,
    async run({ config, logger, registry, signal }) {
      await runRole('sms-simulator', smsSimulatorRole, { config, logger, registry, signal });
      return 0;
    },
  },
};
