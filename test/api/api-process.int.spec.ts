/**
 * `herald api` and `herald api-keys` as deployed, in child processes: a key made by the CLI works over
 * HTTP; on SIGTERM the API stops accepting connections, finishes the request in flight (answered 200,
 * its command committed) and exits 0; the CLI lists and revokes keys.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { herald, heraldArgs } from '../support/cli.js';
import { createTestDatabase, freePort, type TestDatabase } from '../support/services.js';
import { holdRowLock, lineCampaignBody, request, waitForLockWait } from './support/api.js';

let t: TestDatabase;
let child: ChildProcess | undefined;

beforeEach(async () => {
  t = await createTestDatabase();
});
afterEach(async () => {
  // A child killed by a signal has a null exitCode too: only one still running is waited for.
  if (child && child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
  child = undefined;
  await t?.drop();
});

describe('herald api', () => {
  it('serves a CLI-made key, and on SIGTERM finishes the request in flight and exits 0', async () => {
    const made = await herald(t, [
      'api-keys',
      'create',
      '--organization',
      'org-cli',
      '--role',
      'operator',
      '--json',
    ]);
    expect(made.code, made.stderr).toBe(0);
    const { key, apiKey } = JSON.parse(made.stdout) as {
      key: string;
      apiKey: { id: string; prefix: string };
    };
    expect(key.startsWith(apiKey.prefix)).toBe(true);
    // The campaign below is scheduled: its LINE official account must be registered (sealed token).
    const tokenFile = join(await mkdtemp(join(tmpdir(), 'herald-api-')), 'token');
    await writeFile(tokenFile, 'api-process-test-token-0123456789');
    const channel = await herald(t, [
      'line-channels',
      'add',
      'oa-1',
      '--organization',
      'org-cli',
      '--channel-id',
      '1650000099',
      '--token-file',
      tokenFile,
    ]);
    expect(channel.code, channel.stderr).toBe(0);

    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    let output = '';
    child = spawn(process.execPath, heraldArgs(['api']), {
      env: {
        ...process.env,
        DATABASE_URL: t.url,
        HERALD_SCHEMA: t.schema,
        HERALD_API_PORT: String(port),
        HERALD_METRICS_PORT: '0',
        HERALD_LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr?.on('data', (chunk) => {
      output += chunk;
    });
    await waitFor(async () => (await fetch(`${url}/healthz`)).status === 200, {
      what: 'the API to listen',
      timeoutMs: 30_000,
    }).catch((error: Error) => {
      throw new Error(`${error.message}\n${output}`);
    });
    const created = await request(url, 'POST', '/v1/campaigns', {
      key,
      body: lineCampaignBody({ startAt: new Date(Date.now() + 3_600_000).toISOString() }),
      headers: { 'x-request-id': 'cli-create-1' },
    });
    expect(created.status).toBe(201);
    // The request log carries the request id as the correlation id.
    await waitFor(() => /"correlationId":"cli-create-1"/.test(output), { what: 'the request log line' });

    // A pause that waits on a row lock another writer holds is in flight when SIGTERM arrives.
    const lock = await holdRowLock(t, 'campaign', created.body.campaignId);
    let paused: Awaited<ReturnType<typeof request>>;
    try {
      const inFlight = request(url, 'POST', `/v1/campaigns/${created.body.campaignId}/pause`, { key });
      await waitForLockWait(t, 'herald-api');
      child.kill('SIGTERM');
      // Stopped accepting: a new connection is refused while the pause is still in flight.
      await waitFor(
        async () => {
          try {
            await fetch(`${url}/healthz`);
            return false;
          } catch {
            return true;
          }
        },
        { what: 'new connections to be refused' },
      );
      expect(child.exitCode).toBeNull();
      await lock.release();
      paused = await inFlight;
    } finally {
      await lock.release();
    }
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe('PAUSED');
    const [code] = child.exitCode === null ? await once(child, 'exit') : [child.exitCode];
    expect(code, output).toBe(0);
    const { rows } = await t.db.query<{ status: string }>('select status from campaign where id = $1', [
      created.body.campaignId,
    ]);
    expect(rows[0]!.status).toBe('PAUSED');
  });

  it('herald api-keys: list, revoke, usage errors', async () => {
    const made = await herald(t, [
      'api-keys',
      'create',
      '--organization',
      'org-cli',
      '--role',
      'viewer',
      '--name',
      'ops',
    ]);
    expect(made.code).toBe(0);
    expect(made.stdout).toMatch(/^key: hk_[0-9a-f]{8}_\S{43}$/m);
    const id = made.stdout.split(' ')[0]!;
    const listed = await herald(t, ['api-keys', 'list', '--organization', 'org-cli']);
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).not.toContain(made.stdout.match(/^key: (\S+)$/m)![1]);
    expect((await herald(t, ['api-keys', 'revoke', id])).code).toBe(0);
    expect((await herald(t, ['api-keys', 'revoke', id])).code).toBe(1);
    expect((await herald(t, ['api-keys', 'list', '--organization', 'org-cli'])).stdout).not.toContain(id);
    expect((await herald(t, ['api-keys', 'list', '--include-revoked'])).stdout).toContain(id);
    expect(
      (await herald(t, ['api-keys', 'create', '--organization', 'org-cli', '--role', 'root'])).code,
    ).toBe(2);
    expect((await herald(t, ['api-keys', 'create', '--role', 'admin'])).code).toBe(2);
  });
});
