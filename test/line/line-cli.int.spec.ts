/**
 * `herald line-channels` and `herald line-audiences` as an operator runs them (the real CLI in a child
 * process): secrets come from files and are never printed, a key rotation re-seals every channel, and
 * bad input exits 2 with the usage, changing nothing.
 */

import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { herald } from '../support/cli.js';
import { lineUserId, TEST_LINE_CREDENTIALS_KEY } from '../support/line.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
const dir = mkdtempSync(join(tmpdir(), 'herald-line-cli-'));
const TOKEN = 'cli-long-lived-token-0123456789abcdef';
const env = { HERALD_LINE_CREDENTIALS_KEY: TEST_LINE_CREDENTIALS_KEY, HERALD_LINE_CREDENTIALS_KEY_ID: 'k1' };

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

describe('herald line-channels', () => {
  it('adds from a token file, lists and shows without the token, rotates the key, removes', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${TOKEN}\n`);
    const added = await herald(
      t,
      [
        'line-channels',
        'add',
        'oa-cli',
        '--org',
        'org-1',
        '--channel-id',
        '1650000009',
        '--token-file',
        tokenFile,
      ],
      env,
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(
      /registered oa-cli +org org-1 +channel 1650000009 +long-lived token +sealed with key k1/,
    );
    const listed = await herald(t, ['line-channels', 'list', '--json'], env);
    expect(JSON.parse(listed.stdout)).toMatchObject([{ lineOaId: 'oa-cli', keyId: 'k1' }]);
    for (const output of [added, listed, await herald(t, ['line-channels', 'show', 'oa-cli'], env)]) {
      expect(output.stdout + output.stderr).not.toContain(TOKEN);
    }

    const newKey = randomBytes(32).toString('base64');
    const rotatedEnv = {
      HERALD_LINE_CREDENTIALS_KEY: newKey,
      HERALD_LINE_CREDENTIALS_KEY_ID: 'k2',
      HERALD_LINE_CREDENTIALS_OLD_KEYS: `k1:${TEST_LINE_CREDENTIALS_KEY}`,
    };
    const rotated = await herald(t, ['line-channels', 'rotate-key'], rotatedEnv);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toContain('re-sealed 1 channel(s) with key k2; 0 already on it');
    expect((await herald(t, ['line-channels', 'show', 'oa-cli'], rotatedEnv)).stdout).toContain(
      'sealed with key k2',
    );
    const { rows } = await t.db.query<{ sealed_token: string }>('select sealed_token from line_channel');
    expect(rows[0]!.sealed_token.startsWith('v1:k2:')).toBe(true);

    const removed = await herald(t, ['line-channels', 'remove', 'oa-cli'], rotatedEnv);
    expect(removed.stdout).toContain('removed oa-cli');
    expect((await t.db.query('select 1 from line_channel')).rowCount).toBe(0);
  });

  it('exits 2 with the usage for missing credentials, writing nothing', async () => {
    const result = await herald(
      t,
      ['line-channels', 'add', 'oa-x', '--org', 'org-1', '--channel-id', '1'],
      env,
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--token-file, or --client-id and --client-secret-file');
    expect(result.stderr).toContain('usage: herald line-channels');
    expect((await t.db.query('select 1 from line_channel')).rowCount).toBe(0);
  });
});

describe('herald line-audiences', () => {
  it('creates, adds a file of ids in uploads of 10,000, seals and shows', async () => {
    const file = join(dir, 'ids.txt');
    writeFileSync(file, `# members\n${Array.from({ length: 12_345 }, (_, i) => lineUserId(i)).join('\n')}\n`);
    expect(
      (await herald(t, ['line-audiences', 'create', 'aud-cli', '--org', 'org-1', '--name', 'cli'], env)).code,
    ).toBe(0);
    const added = await herald(t, ['line-audiences', 'add', 'aud-cli', '--file', file], env);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain('added 12345 user id(s)');
    expect(added.stdout).toContain('12345 members');
    const sealed = await herald(t, ['line-audiences', 'seal', 'aud-cli'], env);
    expect(sealed.stdout).toMatch(/sealed aud-cli .* 12345 members +sealed /);
    const again = await herald(t, ['line-audiences', 'add', 'aud-cli', '--file', file], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('audience aud-cli is sealed');
    const listed = JSON.parse(
      (await herald(t, ['line-audiences', 'list', '--org', 'org-1', '--json'], env)).stdout,
    );
    expect(listed).toMatchObject([{ audienceId: 'aud-cli', members: 12_345, sealed: true }]);
  });
});
