/**
 * A CSV build that fails for a transient reason (issue 23, item 3): each failed attempt says why on its
 * upload and is retried once it goes stale; the last of HERALD_SMS_BUILD_MAX_ATTEMPTS gives up like an
 * unreadable file — upload and campaign FAILED with the reason, recipients cleared, nothing charged (a
 * charge this attempt made is reversed by its key: one deduction, one refund, never two). The faults are
 * real PostgreSQL errors raised by triggers for the chosen campaigns' attempts, not a mocked database.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRecipientsByStatus } from '../../src/adapters/postgres/sms-queries.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { smsBuildSweeper } from '../../src/aggregates/campaign/sms/build.js';
import type { SmsSettings } from '../../src/aggregates/campaign/sms/settings.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { msisdns, silentLogger, smsService, smsSettings } from '../support/sms.js';

let t: TestDatabase;
let ledger: PostgresLedger;
let settings: SmsSettings;
beforeAll(async () => {
  t = await createTestDatabase();
  ledger = new PostgresLedger(t.db);
  // Attempts go stale 200 ms after their last batch (the database clock), so retries come quickly.
  settings = { ...smsSettings(t), buildStaleMs: 200, buildMaxAttempts: 3 };
  // Faults: a recipient insert of a listed campaign's attempt ≤ fail_attempts raises (disk full);
  // so does marking its upload DONE (after the charge) when fail_done is set, and FAILED while its
  // attempt ≤ fail_failed_until.
  await t.db.query(`
    create table test_build_fault (campaign_id uuid primary key, fail_attempts int not null default 0,
                                   fail_done boolean not null default false,
                                   fail_failed_until int not null default 0);
    create function test_build_fault_insert() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from test_build_fault f join campaign_upload u on u.campaign_id = f.campaign_id
                  where f.campaign_id = new.campaign_id and u.attempt <= f.fail_attempts) then
        raise exception 'could not extend file: No space left on device' using errcode = '53100';
      end if;
      return new;
    end $$;
    create trigger test_build_fault_insert before insert on campaign_recipient
      for each row execute function test_build_fault_insert();
    create function test_build_fault_done() returns trigger language plpgsql as $$
    begin
      if new.status = 'DONE' and exists (select 1 from test_build_fault f
                                          where f.campaign_id = new.campaign_id and f.fail_done) then
        raise exception 'canceling statement due to statement timeout' using errcode = '57014';
      end if;
      return new;
    end $$;
    create function test_build_fault_failed() returns trigger language plpgsql as $$
    begin
      if new.status = 'FAILED' and exists (select 1 from test_build_fault f
                                            where f.campaign_id = new.campaign_id and new.attempt <= f.fail_failed_until) then
        raise exception 'could not write to file: No space left on device' using errcode = '53100';
      end if;
      return new;
    end $$;
    create trigger test_build_fault_failed before update on campaign_upload
      for each row execute function test_build_fault_failed();
    create trigger test_build_fault_done before update on campaign_upload
      for each row execute function test_build_fault_done();`);
});
afterAll(async () => t?.drop());

const meta = {
  name: 'Boishakh sale',
  messageType: 'PROMOTIONAL',
  lang: 'bn',
  campaignId: 'BTRC-2030-023',
  templateType: 'GENERIC',
  template: 'পহেলা বৈশাখে ৩০% ছাড়!',
  fileName: 'numbers.csv',
};

async function* once(text: string): AsyncGenerator<Buffer> {
  yield Buffer.from(text, 'utf8');
}

/** A BUILDING campaign of `org` with five rows, its faults armed before any build sees it. */
async function uploaded(
  org: string,
  offset: number,
  fault: { failAttempts?: number; failDone?: boolean; failFailedUntil?: number },
) {
  await ledger.credit({ organizationId: org, key: 'top-up', amount: '100' });
  const { service } = smsService(t, { settings });
  const created = await service.createBulk(meta, once(`msisdn\n${msisdns(5, '017', offset).join('\n')}\n`), {
    organizationId: org,
  });
  const id = created.body.campaign.campaignId;
  await t.db.query(
    'insert into test_build_fault (campaign_id, fail_attempts, fail_done, fail_failed_until) values ($1, $2, $3, $4)',
    [id, fault.failAttempts ?? 0, fault.failDone ?? false, fault.failFailedUntil ?? 0],
  );
  return { id, service };
}

function builder(overrides: Partial<SmsSettings> = {}) {
  return smsBuildSweeper({
    db: t.db,
    handler: new CommandHandler({ db: t.db, pod: 'test' }),
    logger: silentLogger,
    billing: ledger,
    settings: { ...settings, ...overrides },
  });
}

/** Sweeps until the build of `id` ended one more attempt; returns that attempt's outcome. */
async function nextAttempt(sweeper: ReturnType<typeof builder>, id: string) {
  const before = sweeper.builder.outcomes.filter((o) => o.campaignId === id).length;
  await waitFor(
    async () => {
      await sweeper.sweep();
      return sweeper.builder.outcomes.filter((o) => o.campaignId === id).length > before || undefined;
    },
    { what: `build attempt ${before + 1} of ${id}`, timeoutMs: 10_000 },
  );
  return sweeper.builder.outcomes.filter((o) => o.campaignId === id).at(-1)!;
}

async function entries(org: string, id: string): Promise<string[]> {
  const { rows } = await t.db.query<{ kind: string }>(
    'select kind from billing_entry where organization_id = $1 and key = $2 order by id',
    [org, `campaign:${id}`],
  );
  return rows.map((r) => r.kind);
}

describe('a build failing for a transient reason', () => {
  it('fewer times than the limit: each failure on the upload, still BUILDING; the next attempt charges once → QUEUED', async () => {
    const org = 'org-give-up-recovers';
    const { id, service } = await uploaded(org, 0, { failAttempts: 2 });
    const sweeper = builder();

    for (const attempt of [1, 2]) {
      const outcome = await nextAttempt(sweeper, id);
      expect(outcome).toMatchObject({ attempt, status: 'RETRYING' });
      const upload = await service.upload(id);
      expect(upload.status).toBe('IN_PROGRESS');
      expect(upload.error).toMatch(
        new RegExp(`^build attempt ${attempt} of 3 failed: could not extend file: No space left on device`),
      );
      expect(await service.get(id)).toMatchObject({ status: 'BUILDING', sms: { recipients: 0 } });
      expect(await entries(org, id)).toEqual([]);
    }

    expect(await nextAttempt(sweeper, id)).toMatchObject({ attempt: 3, status: 'QUEUED', accepted: 5 });
    expect(await service.upload(id)).toMatchObject({ status: 'DONE', error: null });
    expect(await service.get(id)).toMatchObject({ status: 'QUEUED', sms: { recipients: 5 } });
    expect(await entries(org, id)).toEqual(['deduction']);
  });

  it('on every attempt: the last one gives up — upload and campaign FAILED with the reason, nothing charged, no retry', async () => {
    const org = 'org-give-up-always';
    const { id, service } = await uploaded(org, 100, { failAttempts: 99 });
    const sweeper = builder();

    expect(await nextAttempt(sweeper, id)).toMatchObject({ attempt: 1, status: 'RETRYING' });
    expect(await nextAttempt(sweeper, id)).toMatchObject({ attempt: 2, status: 'RETRYING' });
    const last = await nextAttempt(sweeper, id);
    expect(last).toMatchObject({ attempt: 3, status: 'FAILED' });
    expect(last.reason).toMatch(
      /^the build failed 3 times \(HERALD_SMS_BUILD_MAX_ATTEMPTS\), the last with: could not extend file: No space left on device; gave up with nothing charged/,
    );

    const campaign = await service.get(id);
    expect(campaign).toMatchObject({ status: 'FAILED', failureReason: last.reason, sms: { recipients: 0 } });
    expect(await service.upload(id)).toMatchObject({ status: 'FAILED', error: last.reason });
    expect(await countRecipientsByStatus(t.db, id)).toEqual({});
    expect(await entries(org, id)).toEqual([]);
    expect((await ledger.totals(org))!.balance).toBe('100.0000');
    // Nothing is left for a later sweep.
    const after = await t.db.query<{ due: boolean }>(
      `select exists (select 1 from campaign_upload where campaign_id = $1 and status in ('PENDING', 'IN_PROGRESS')) as due`,
      [id],
    );
    expect(after.rows[0]!.due).toBe(false);
  });

  it('after its charge, on the last attempt: FAILED and the charge reversed by its key — one deduction, one refund', async () => {
    const org = 'org-give-up-charged';
    const { id, service } = await uploaded(org, 200, { failDone: true });
    const sweeper = builder({ buildMaxAttempts: 1 });

    const outcome = await nextAttempt(sweeper, id);
    expect(outcome).toMatchObject({ attempt: 1, status: 'FAILED' });
    expect(outcome.reason).toMatch(/the build failed 1 times .*statement timeout/);
    expect(await service.get(id)).toMatchObject({ status: 'FAILED', sms: { recipients: 0 } });
    expect(await service.upload(id)).toMatchObject({ status: 'FAILED', error: outcome.reason });
    expect(await entries(org, id)).toEqual(['deduction', 'refund']);
    expect((await ledger.totals(org))!.balance).toBe('100.0000');
  });

  it('its give-up failing too (the database still down): the next claim, past the limit, gives up', async () => {
    const org = 'org-give-up-claims';
    const { id, service } = await uploaded(org, 300, { failAttempts: 99, failFailedUntil: 3 });
    const sweeper = builder();
    expect(await nextAttempt(sweeper, id)).toMatchObject({ attempt: 1, status: 'RETRYING' });
    expect(await nextAttempt(sweeper, id)).toMatchObject({ attempt: 2, status: 'RETRYING' });
    // The last attempt cannot record its give-up either: left to go stale.
    expect(await nextAttempt(sweeper, id)).toMatchObject({ attempt: 3, status: 'RETRYING' });
    expect((await service.get(id)).status).toBe('BUILDING');
    const outcome = await nextAttempt(sweeper, id);
    expect(outcome).toMatchObject({ attempt: 4, status: 'FAILED' });
    expect(outcome.reason).toMatch(
      /^the build was attempted 3 times \(HERALD_SMS_BUILD_MAX_ATTEMPTS\) without finishing \(last: build attempt 2 of 3 failed: could not extend file/,
    );
    expect(await service.get(id)).toMatchObject({ status: 'FAILED', failureReason: outcome.reason });
    expect(await service.upload(id)).toMatchObject({ status: 'FAILED', error: outcome.reason });
    expect(await entries(org, id)).toEqual([]);
  });
});
