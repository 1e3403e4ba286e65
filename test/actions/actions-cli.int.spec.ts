/**
 * `herald actions` through the real CLI on a test database: schedule, list, show, signal, fire,
 * reschedule, cancel and subjects, with the operator recorded as actor; refusals exit 1 with the
 * reason and change nothing, usage errors exit 2.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionsHarness, waitAction } from '../support/actions.js';
import { herald } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe('herald actions', () => {
  it('schedule, list, show, signal, fire, reschedule, cancel and subject', async () => {
    const h = actionsHarness(t);
    const params = JSON.stringify(waitAction('cli-subject:node-1', { organizationId: 'org-cli' }));
    const scheduled = await herald(t, ['actions', 'schedule', params, '--json']);
    expect(scheduled.code, scheduled.stderr).toBe(0);
    const wait = JSON.parse(scheduled.stdout) as { actionId: string; status: string };
    expect(wait.status).toBe('pending');

    const normal = await h.service.schedule({
      organizationId: 'org-cli',
      mode: 'normal',
      actionType: 'send_message',
      actionConfig: {},
      delaySeconds: 3600,
    });
    const listed = await herald(t, ['actions', 'list', '--organization', 'org-cli', '--status', 'pending']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(wait.actionId);
    expect(listed.stdout).toContain(`${normal.actionId} pending org-cli send_message due`);
    expect(listed.stdout).toMatch(/waits for clicked on cli-subject:node-1 until/);

    const signal = await herald(t, [
      'actions',
      'signal',
      '--organization',
      'org-cli',
      '--correlation',
      'cli-subject:node-1',
      '--name',
      'clicked',
      '--payload',
      '{"url":"https://example.test/a"}',
    ]);
    expect(signal.code, signal.stderr).toBe(0);
    expect(signal.stdout).toMatch(new RegExp(`unlocked 1 wait\\(s\\)\\n  unlocked ${wait.actionId}`));
    expect(await h.service.get(wait.actionId)).toMatchObject({ unlockedBy: { name: 'clicked' } });

    const later = new Date(Date.parse(normal.executeAt) + 3_600_000).toISOString();
    const moved = await herald(t, [
      'actions',
      'reschedule',
      normal.actionId,
      '--execute-at',
      later,
      '--reason',
      'asked',
      '--actor',
      'ops:ann',
    ]);
    expect(moved.code, moved.stderr).toBe(0);
    expect((await h.service.get(normal.actionId)).executeAt).toBe(later);

    const fired = await herald(t, ['actions', 'fire', normal.actionId, '--reason', 'now please']);
    expect(fired.code, fired.stderr).toBe(0);
    expect(fired.stdout).toMatch(/firedNow|pending|processing/);

    const other = await h.service.schedule(waitAction('cli-subject:node-2', { organizationId: 'org-cli' }));
    const cancelled = await herald(t, [
      'actions',
      'cancel',
      other.actionId,
      '--reason',
      'unsubscribed',
      '--actor',
      'ops:ann',
    ]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toMatch(/cancelled/);

    const shown = await herald(t, ['actions', 'show', other.actionId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/ActionCancelled by ops:ann .*unsubscribed/);
    const history = await h.service.history(normal.actionId);
    expect(history.find((e) => e.type === 'ActionRescheduled')?.meta.actor).toBe('ops:ann');

    // Refusals: exit 1 with the reason; nothing changes.
    const again = await herald(t, ['actions', 'cancel', other.actionId, '--reason', 'again']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/cannot CancelAction .* in status cancelled/);
    const missing = await herald(t, ['actions', 'show', '00000000-0000-4000-8000-000000000000']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/not found/);
    const invalid = await herald(t, ['actions', 'schedule', '{"organizationId":"org-cli","mode":"normal"}']);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/actionType/);
    // Usage: exit 2.
    const usage = await herald(t, ['actions', 'cancel', other.actionId]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--reason is required/);
    expect((await herald(t, ['actions', 'list', '--bogus'])).code).toBe(2);

    const subject = await herald(t, ['actions', 'subject', 'org-cli', 'alice', '--set', '{"tier":"gold"}']);
    expect(subject.code, subject.stderr).toBe(0);
    expect((await h.service.getSubject('org-cli', 'alice')).attributes).toEqual({ tier: 'gold' });
    const read = await herald(t, ['actions', 'subject', 'org-cli', 'alice']);
    expect(read.stdout).toMatch(/org-cli\/alice \{"tier":"gold"\}/);
  });
});
