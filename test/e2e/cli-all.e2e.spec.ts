/**
 * The CLI as deployed: `herald all` in a child process dispatches a campaign end to end — to LINE, here
 * the LINE test server (one accepted call under the campaign's planned retry key, every request valid) —
 * and exits 0 on SIGTERM; an invalid setting stops start-up with exit code 2 naming the variable.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { heraldArgs } from '../support/cli.js';
import {
  type LineWorld,
  lineAcceptancesPerChunk,
  lineEnv,
  lineWorld,
  startTestLineSimulator,
  TEST_LINE_CONTENT,
  testLineSettings,
} from '../support/line.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let child: ChildProcess | undefined;
let simulator: LineSimulator;
let world: LineWorld;

beforeAll(async () => {
  simulator = await startTestLineSimulator();
});
afterAll(async () => {
  await simulator?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
  simulator.reset();
  world = await lineWorld(t.db, simulator, testLineSettings(simulator));
});
afterEach(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
  await t?.drop();
});

function herald(args: string[], env: Record<string, string>) {
  const process_ = spawn(process.execPath, heraldArgs(args), {
    // `herald all` runs the HTTP API too: on any free port, so nothing else on the host is in its way.
    env: {
      ...process.env,
      DATABASE_URL: t.url,
      HERALD_SCHEMA: t.schema,
      HERALD_LOG_LEVEL: 'warn',
      HERALD_API_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  process_.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  process_.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  return { process: process_, output: () => output };
}

describe('herald CLI', () => {
  it('`herald all` dispatches a campaign and exits 0 on SIGTERM', async () => {
    const run = herald(['all'], {
      HERALD_SCANNER_POLL_MS: '500',
      HERALD_RELAY_IDLE_POLL_MS: '500',
      ...lineEnv(simulator),
    });
    child = run.process;
    await waitFor(async () => /migrations applied/.test(run.output()), {
      what: 'migrations',
      timeoutMs: 30_000,
    });
    const service = campaignService(t.db);
    const c = await service.create(lineCampaign({ castType: 'broadcast', ...TEST_LINE_CONTENT }));
    await service.activate(c.campaignId); // QUEUED: the scanner in the child claims it
    await waitFor(async () => (await service.get(c.campaignId)).status === 'COMPLETED', {
      what: 'COMPLETED through the child process',
      timeoutMs: 30_000,
    }).catch((error: Error) => {
      throw new Error(`${error.message}\n--- herald all output ---\n${run.output()}`);
    });
    const requests = simulator.stats(world.channelId).requests;
    expect(lineAcceptancesPerChunk(requests, await service.get(c.campaignId))).toEqual([1]);
    expect(requests).toHaveLength(1);
    expect(simulator.violationCount).toBe(0);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code, run.output()).toBe(0);
  });

  it('an invalid setting stops start-up with exit code 2 and names the variable', async () => {
    const run = herald(['relay'], { HERALD_RELAY_BATCH_SIZE: 'many' });
    child = run.process;
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(run.output()).toMatch(/invalid configuration: HERALD_RELAY_BATCH_SIZE/);
  });
});
