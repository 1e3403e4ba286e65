/**
 * The SMPP gateway's queries (ADR 0022), one named statement each, every state change guarded by the
 * part's current state (and its owner while it is being sent) in the WHERE, batches as arrays. The
 * part's states record what the SMSC can have seen (invariant 9): a part is marked `sending` in its own
 * transaction before its submit_sm is written, and only a proof that the SMSC did not take it (a
 * throttled or retryable response, a write that never left) puts it back to `queued`.
 */
import type { SqlClient } from '../../ports/database.js';

export interface NewGatewaySubmission {
  submissionId: string;
  campaignId: string;
  organizationId: string;
  epoch: number;
  smsc: string;
  operator: string;
  routeChannel: string;
  mnoUser: string;
  sender: string;
  encoding: 'GSM7' | 'UCS2';
  segments: number;
  content: string;
  messageType: string;
}

export interface NewGatewayPart {
  recipientId: string;
  msisdn: string;
  partNo: number;
  parts: number;
  /** `queued`, or `withdrawn` (with a reason) when the chunk came for a campaign that no longer sends. */
  state: 'queued' | 'withdrawn';
  withdrawnReason: string | null;
}

const INSERT_SUBMISSION = `
insert into sms_gateway_submission (submission_id, campaign_id, organization_id, epoch, smsc, operator,
  route_channel, mno_user, sender, encoding, segments, content, message_type)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
on conflict (submission_id) do nothing
returning submission_id`;

const INSERT_PARTS = `
insert into sms_gateway_part (submission_id, campaign_id, smsc, recipient_id, msisdn, part_no, parts, state,
  withdrawn_reason)
select $1, $2, $3, x.recipient_id, x.msisdn, x.part_no, x.parts, x.state, x.reason
  from unnest($4::bigint[], $5::text[], $6::smallint[], $7::smallint[], $8::text[], $9::text[])
       as x(recipient_id, msisdn, part_no, parts, state, reason)
on conflict (submission_id, recipient_id, part_no) do nothing`;

/** Stores a chunk and its parts; false when the submission was stored before (a redelivery under another id). */
export async function insertGatewaySubmission(
  sql: SqlClient,
  submission: NewGatewaySubmission,
  parts: readonly NewGatewayPart[],
): Promise<boolean> {
  const s = submission;
  const { rows } = await sql.query(INSERT_SUBMISSION, [
    s.submissionId,
    s.campaignId,
    s.organizationId,
    s.epoch,
    s.smsc,
    s.operator,
    s.routeChannel,
    s.mnoUser,
    s.sender,
    s.encoding,
    s.segments,
    s.content,
    s.messageType,
  ]);
  if (rows.length === 0) return false;
  await sql.query(INSERT_PARTS, [
    s.submissionId,
    s.campaignId,
    s.smsc,
    parts.map((p) => p.recipientId),
    parts.map((p) => p.msisdn),
    parts.map((p) => p.partNo),
    parts.map((p) => p.parts),
    parts.map((p) => p.state),
    parts.map((p) => p.withdrawnReason),
  ]);
  return true;
}

/** The campaign's status and each named recipient's, as the fence reads them. */
const SENDING_STATE = `
select (select status from campaign where id = $1) as campaign_status,
       coalesce((select json_agg(json_build_object('id', r.id::text, 'status', r.status,
                                                   'submissionId', r.submission_id::text))
                   from campaign_recipient r where r.id = any($2::bigint[])), '[]'::json) as recipients`;

export async function sendingState(
  sql: SqlClient,
  campaignId: string,
  recipientIds: readonly string[],
): Promise<{
  campaignStatus: string | null;
  recipients: Map<string, { status: string; submissionId: string | null }>;
}> {
  const { rows } = await sql.query<{
    campaign_status: string | null;
    recipients: { id: string; status: string; submissionId: string | null }[];
  }>(SENDING_STATE, [campaignId, recipientIds]);
  const row = rows[0]!;
  return {
    campaignStatus: row.campaign_status,
    recipients: new Map(
      row.recipients.map((r) => [r.id, { status: r.status, submissionId: r.submissionId }]),
    ),
  };
}

export interface ClaimedPart {
  id: string;
  submissionId: string;
  recipientId: string;
  msisdn: string;
  partNo: number;
  parts: number;
  content: string;
  encoding: 'GSM7' | 'UCS2';
  sender: string;
  campaignId: string;
}

/**
 * A bind's window: up to `limit` of the SMSC's due queued parts, locked (SKIP LOCKED: any number of
 * gateways), each re-checked against its campaign (still sending: DISPATCHING or QUEUED) and its recipient
 * (still SUBMITTED under this very submission). Sendable ones become `sending` (owner, time: the intent,
 * committed before anything is written to the SMSC); the others `withdrawn` with the reason.
 */
const CLAIM_PARTS = `
with due as (
  select p.id from sms_gateway_part p
   where p.smsc = $1 and p.state = 'queued' and p.next_attempt_at <= now()
   order by p.next_attempt_at, p.id
   for update skip locked
   limit $3
), checked as (
  select d.id,
         coalesce(c.status in ('DISPATCHING', 'QUEUED') and r.status = 'SUBMITTED'
                  and r.submission_id = p.submission_id, false) as sendable,
         case when c.status is null then 'campaign not found'
              when c.status not in ('DISPATCHING', 'QUEUED') then c.status
              when r.status is null then 'recipient not found'
              else 'recipient ' || r.status end as reason
    from due d
    join sms_gateway_part p on p.id = d.id
    left join campaign c on c.id = p.campaign_id
    left join campaign_recipient r on r.id = p.recipient_id
), sent as (
  update sms_gateway_part p set state = 'sending', owner = $2, sending_at = now()
    from checked k
   where p.id = k.id and k.sendable and p.state = 'queued'
  returning p.id, p.submission_id, p.recipient_id, p.msisdn, p.part_no, p.parts
), withdrawn as (
  update sms_gateway_part p set state = 'withdrawn', withdrawn_reason = k.reason
    from checked k
   where p.id = k.id and not k.sendable and p.state = 'queued'
  returning p.id, p.submission_id, p.recipient_id
)
select 'send' as action, s.id::text, s.submission_id::text, s.recipient_id::text, s.msisdn, s.part_no, s.parts,
       sub.content, sub.encoding, sub.sender, sub.campaign_id::text
  from sent s join sms_gateway_submission sub on sub.submission_id = s.submission_id
union all
select 'withdrawn', w.id::text, w.submission_id::text, w.recipient_id::text, null, null, null, null, null, null, null
  from withdrawn w`;

export async function claimParts(
  sql: SqlClient,
  params: { smsc: string; owner: string; limit: number },
): Promise<{ send: ClaimedPart[]; withdrawn: { submissionId: string; recipientId: string }[] }> {
  const { rows } = await sql.query<{
    action: 'send' | 'withdrawn';
    id: string;
    submission_id: string;
    recipient_id: string;
    msisdn: string;
    part_no: number;
    parts: number;
    content: string;
    encoding: 'GSM7' | 'UCS2';
    sender: string;
    campaign_id: string;
  }>(CLAIM_PARTS, [params.smsc, params.owner, params.limit]);
  const send: ClaimedPart[] = [];
  const withdrawn: { submissionId: string; recipientId: string }[] = [];
  for (const r of rows) {
    if (r.action === 'withdrawn')
      withdrawn.push({ submissionId: r.submission_id, recipientId: r.recipient_id });
    else
      send.push({
        id: r.id,
        submissionId: r.submission_id,
        recipientId: r.recipient_id,
        msisdn: r.msisdn,
        partNo: r.part_no,
        parts: r.parts,
        content: r.content,
        encoding: r.encoding,
        sender: r.sender,
        campaignId: r.campaign_id,
      });
  }
  send.sort((a, b) => Number(a.id) - Number(b.id));
  return { send, withdrawn };
}

/** What came back for one part written by a bind. */
export interface PartResponse {
  id: string;
  state: 'accepted' | 'queued' | 'failed' | 'unconfirmed';
  smscMessageId: string | null;
  commandStatus: number | null;
  /** queued: when it may go again (ms from now). */
  delayMs: number;
  /** queued after ESME_RTHROTTLED / a retryable status: counted on the part. */
  throttled: boolean;
  resubmitted: boolean;
}

const RECORD_RESPONSES = `
update sms_gateway_part p
   set state = x.state,
       smsc_message_id = coalesce(x.message_id, p.smsc_message_id),
       command_status = coalesce(x.command_status, p.command_status),
       resp_at = case when x.state = 'queued' then p.resp_at else now() end,
       next_attempt_at = case when x.state = 'queued' then now() + make_interval(secs => x.delay_ms / 1000.0)
                              else p.next_attempt_at end,
       owner = case when x.state = 'queued' then null else p.owner end,
       sending_at = case when x.state = 'queued' then null else p.sending_at end,
       throttled = p.throttled + x.throttled,
       resubmits = p.resubmits + x.resubmitted
  from unnest($2::bigint[], $3::text[], $4::text[], $5::integer[], $6::integer[], $7::integer[], $8::integer[])
       as x(id, state, message_id, command_status, delay_ms, throttled, resubmitted)
 where p.id = x.id and p.state = 'sending' and p.owner = $1
returning p.id::text, p.submission_id::text, p.recipient_id::text, p.state`;

/** Records a bind's responses (only for parts it still owns in `sending`); returns the parts changed. */
export async function recordResponses(
  sql: SqlClient,
  owner: string,
  responses: readonly PartResponse[],
): Promise<{ id: string; submissionId: string; recipientId: string; state: string }[]> {
  if (responses.length === 0) return [];
  const { rows } = await sql.query<{
    id: string;
    submission_id: string;
    recipient_id: string;
    state: string;
  }>(RECORD_RESPONSES, [
    owner,
    responses.map((r) => r.id),
    responses.map((r) => r.state),
    responses.map((r) => r.smscMessageId),
    responses.map((r) => r.commandStatus),
    responses.map((r) => Math.max(0, Math.round(r.delayMs))),
    responses.map((r) => (r.throttled ? 1 : 0)),
    responses.map((r) => (r.resubmitted ? 1 : 0)),
  ]);
  return rows.map((r) => ({
    id: r.id,
    submissionId: r.submission_id,
    recipientId: r.recipient_id,
    state: r.state,
  }));
}

export interface NewGatewayReceipt {
  smsc: string;
  smscMessageId: string | null;
  outcome: string | null;
  errorCode: string | null;
  final: boolean;
  problem: string | null;
  raw: string;
}

const INSERT_RECEIPTS = `
insert into sms_gateway_receipt (smsc, smsc_message_id, outcome, error_code, final, problem, raw)
select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::text[], $7::text[])
returning id::text`;

export async function insertReceipts(
  sql: SqlClient,
  receipts: readonly NewGatewayReceipt[],
): Promise<string[]> {
  if (receipts.length === 0) return [];
  const { rows } = await sql.query<{ id: string }>(INSERT_RECEIPTS, [
    receipts.map((r) => r.smsc),
    receipts.map((r) => r.smscMessageId),
    receipts.map((r) => r.outcome),
    receipts.map((r) => r.errorCode),
    receipts.map((r) => r.final),
    receipts.map((r) => r.problem),
    receipts.map((r) => r.raw),
  ]);
  return rows.map((r) => r.id);
}

/**
 * Receipts matched to accepted parts by (smsc, message id): by receipt ids, or by newly accepted part ids.
 * An SMSC's message ids repeat in time (counters wrap, an SMSC is replaced), so a receipt goes to the
 * newest accepted part of that id still waiting for its receipt.
 */
const MATCH_RECEIPTS = (by: 'receipts' | 'parts' | 'recent') => `
with candidates as (
  select distinct on (r.id) r.id as receipt_id, p.id as part_id
    from sms_gateway_receipt r
    join sms_gateway_part p on p.smsc = r.smsc and p.smsc_message_id = r.smsc_message_id
   where ${
     by === 'receipts'
       ? 'r.id = any($1::bigint[])'
       : by === 'parts'
         ? 'p.id = any($1::bigint[])'
         : 'r.id in (select id from sms_gateway_receipt where part_id is null and smsc_message_id is not null and received_at > now() - make_interval(secs => $1::int) order by id desc limit 5000)'
   }
     and r.part_id is null and r.smsc_message_id is not null
     and p.state = 'accepted' and p.receipt_status is null
   order by r.id, p.id desc
), matched as (
  update sms_gateway_receipt r set part_id = c.part_id
    from candidates c
   where r.id = c.receipt_id and r.part_id is null
  returning r.part_id, r.outcome, r.error_code, r.final
), applied as (
  update sms_gateway_part p
     set receipt_status = m.outcome, receipt_error = m.error_code, receipt_at = now()
    from matched m
   where p.id = m.part_id and m.final and p.receipt_status is null
  returning p.submission_id, p.recipient_id
)
select distinct submission_id::text, recipient_id::text from applied`;
const MATCH_BY_RECEIPTS = MATCH_RECEIPTS('receipts');
const MATCH_BY_PARTS = MATCH_RECEIPTS('parts');
const MATCH_RECENT = MATCH_RECEIPTS('recent');

/**
 * Receipts still unmatched that arrived within `withinSeconds`: a receipt recorded on one bind while its
 * part's answer was being recorded on another (neither transaction saw the other's row) is matched here,
 * by the gateway's periodic sweep.
 */
export async function matchRecentReceipts(
  sql: SqlClient,
  withinSeconds: number,
): Promise<{ submissionId: string; recipientId: string }[]> {
  const { rows } = await sql.query<{ submission_id: string; recipient_id: string }>(MATCH_RECENT, [
    withinSeconds,
  ]);
  return rows.map((r) => ({ submissionId: r.submission_id, recipientId: r.recipient_id }));
}

export async function matchReceipts(
  sql: SqlClient,
  by: 'receipts' | 'parts',
  ids: readonly string[],
): Promise<{ submissionId: string; recipientId: string }[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql.query<{ submission_id: string; recipient_id: string }>(
    by === 'receipts' ? MATCH_BY_RECEIPTS : MATCH_BY_PARTS,
    [ids],
  );
  return rows.map((r) => ({ submissionId: r.submission_id, recipientId: r.recipient_id }));
}

export interface RecipientParts {
  submissionId: string;
  recipientId: string;
  parts: {
    state: 'queued' | 'sending' | 'accepted' | 'failed' | 'unconfirmed' | 'withdrawn';
    commandStatus: number | null;
    receiptStatus: string | null;
    receiptError: string | null;
    withdrawnReason: string | null;
  }[];
}

/**
 * Serializes the report decisions of one recipient: two transactions that each recorded the receipt of
 * one of its parts (two binds, or a bind and the late-receipt sweep) would otherwise each read the other
 * part as unanswered and neither would report it (write skew). Taken in id order, after the parts were
 * written (part rows, then recipient rows, in every such transaction: no lock cycle).
 */
const LOCK_RECIPIENTS = `
  select id from campaign_recipient where id = any($1::bigint[]) order by id for update`;

const PARTS_OF_RECIPIENTS = `
select p.submission_id::text, p.recipient_id::text, p.state, p.command_status, p.receipt_status, p.receipt_error,
       p.withdrawn_reason
  from unnest($1::uuid[], $2::bigint[]) as x(submission_id, recipient_id)
  join sms_gateway_part p on p.submission_id = x.submission_id and p.recipient_id = x.recipient_id
 where not exists (select 1 from sms_gateway_report g
                    where g.submission_id = x.submission_id and g.recipient_id = x.recipient_id)
 order by p.submission_id, p.recipient_id, p.part_no`;

/** The parts of recipients not reported yet. */
export async function partsOfRecipients(
  sql: SqlClient,
  pairs: readonly { submissionId: string; recipientId: string }[],
): Promise<RecipientParts[]> {
  if (pairs.length === 0) return [];
  // A statement of its own: the read below then starts after the locks were granted and sees what the
  // transaction that held them committed.
  await sql.query(LOCK_RECIPIENTS, [[...new Set(pairs.map((p) => p.recipientId))]]);
  const { rows } = await sql.query<{
    submission_id: string;
    recipient_id: string;
    state: RecipientParts['parts'][number]['state'];
    command_status: number | null;
    receipt_status: string | null;
    receipt_error: string | null;
    withdrawn_reason: string | null;
  }>(PARTS_OF_RECIPIENTS, [pairs.map((p) => p.submissionId), pairs.map((p) => p.recipientId)]);
  const grouped = new Map<string, RecipientParts>();
  for (const r of rows) {
    const key = `${r.submission_id}/${r.recipient_id}`;
    let entry = grouped.get(key);
    if (!entry) {
      entry = { submissionId: r.submission_id, recipientId: r.recipient_id, parts: [] };
      grouped.set(key, entry);
    }
    entry.parts.push({
      state: r.state,
      commandStatus: r.command_status,
      receiptStatus: r.receipt_status,
      receiptError: r.receipt_error,
      withdrawnReason: r.withdrawn_reason,
    });
  }
  return [...grouped.values()];
}

export interface DecidedReport {
  submissionId: string;
  recipientId: string;
  status: string;
  errorCode: string | null;
}

const INSERT_REPORTS = `
with ins as (
  insert into sms_gateway_report (submission_id, recipient_id, status, error_code)
  select * from unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[])
  on conflict (submission_id, recipient_id) do nothing
  returning submission_id, recipient_id, status, error_code, reported_at
), withdrawn as (
  update sms_gateway_part p set state = 'withdrawn', withdrawn_reason = 'recipient reported'
    from ins
   where p.submission_id = ins.submission_id and p.recipient_id = ins.recipient_id and p.state = 'queued'
  returning p.id
)
select ins.submission_id::text, ins.recipient_id::text, ins.status, ins.error_code, ins.reported_at,
       s.campaign_id::text, s.organization_id, s.operator, s.epoch, s.received_at,
       (select msisdn from sms_gateway_part p
         where p.submission_id = ins.submission_id and p.recipient_id = ins.recipient_id limit 1) as msisdn
  from ins join sms_gateway_submission s on s.submission_id = ins.submission_id`;

export interface InsertedReport extends DecidedReport {
  campaignId: string;
  organizationId: string;
  operator: string;
  epoch: number;
  msisdn: string;
  receivedAt: Date;
  reportedAt: Date;
}

/**
 * Records each recipient's one report (a second decision for the same recipient changes nothing) and
 * withdraws its parts still queued; returns the reports recorded now, with what the DLR payload needs.
 */
export async function insertReports(
  sql: SqlClient,
  reports: readonly DecidedReport[],
): Promise<InsertedReport[]> {
  if (reports.length === 0) return [];
  const { rows } = await sql.query<{
    submission_id: string;
    recipient_id: string;
    status: string;
    error_code: string | null;
    reported_at: Date;
    campaign_id: string;
    organization_id: string;
    operator: string;
    epoch: number;
    received_at: Date;
    msisdn: string;
  }>(INSERT_REPORTS, [
    reports.map((r) => r.submissionId),
    reports.map((r) => r.recipientId),
    reports.map((r) => r.status),
    reports.map((r) => r.errorCode),
  ]);
  return rows.map((r) => ({
    submissionId: r.submission_id,
    recipientId: r.recipient_id,
    status: r.status,
    errorCode: r.error_code,
    campaignId: r.campaign_id,
    organizationId: r.organization_id,
    operator: r.operator,
    epoch: r.epoch,
    msisdn: r.msisdn,
    receivedAt: r.received_at,
    reportedAt: r.reported_at,
  }));
}

const SWEEP_UNCONFIRMED = `
update sms_gateway_part p set state = 'unconfirmed', resp_at = now()
 where p.id in (select id from sms_gateway_part
                 where state = 'sending' and sending_at < now() - make_interval(secs => $1 / 1000.0)
                 order by sending_at
                 for update skip locked
                 limit $2)
   and p.state = 'sending'
returning p.submission_id::text, p.recipient_id::text`;

/**
 * Parts written longer ago than `olderThanMs` (past any bind's response window) that nobody recorded an
 * answer for: their gateway died or lost the bind before it could. UNCONFIRMED, never resent.
 */
export async function sweepUnconfirmed(
  sql: SqlClient,
  olderThanMs: number,
  limit: number,
): Promise<{ submissionId: string; recipientId: string }[]> {
  const { rows } = await sql.query<{ submission_id: string; recipient_id: string }>(SWEEP_UNCONFIRMED, [
    olderThanMs,
    limit,
  ]);
  return rows.map((r) => ({ submissionId: r.submission_id, recipientId: r.recipient_id }));
}

const PART_COUNTS = `
select state, count(*)::int as count from sms_gateway_part
 where ($1::uuid is null or campaign_id = $1) group by state`;

/** Parts by state (tests, the gateway's stop line). */
export async function gatewayPartCounts(
  sql: SqlClient,
  campaignId: string | null = null,
): Promise<Record<string, number>> {
  const { rows } = await sql.query<{ state: string; count: number }>(PART_COUNTS, [campaignId]);
  return Object.fromEntries(rows.map((r) => [r.state, r.count]));
}
