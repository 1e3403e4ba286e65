/**
 * The HTTP API part of `npm run demo`: the demo's process serves the API (HERALD_API_HOST /
 * HERALD_API_PORT, any free port when that one is taken) for the whole run, prints its URL and an admin
 * key of the demo's organization so a user can follow the README's curl section while the demo runs,
 * and schedules one campaign through it with an Idempotency-Key — sent twice, the second answer being
 * the replay — which the demo then watches complete with the others. HERALD_DEMO_API_SECONDS keeps the
 * API up that long after the demo's run (Ctrl-C ends it sooner); by default the demo exits at once.
 */
import { startApi } from '../api/api-role.js';
import { createApiKey } from '../api/auth.js';
import type { RunningApiServer } from '../api/server.js';
import type { Runtime } from '../runtime/runtime.js';

export interface DemoApi {
  url: string;
  key: string;
  close(): Promise<void>;
}

export async function startDemoApi(
  runtime: Runtime,
  organizationId: string,
  out: (line?: string) => void,
): Promise<DemoApi> {
  let server: RunningApiServer;
  try {
    server = await startApi(runtime);
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EADDRINUSE') throw error;
    const config = { ...runtime.config, api: { ...runtime.config.api, port: 0 } };
    server = await startApi({ ...runtime, config });
    out(`(port ${runtime.config.api.port} is taken: the API listens on another one)`);
  }
  const { key } = await createApiKey(runtime.db, {
    organizationId,
    role: 'admin',
    name: 'demo',
    createdBy: 'demo',
  });
  out(`HTTP API: ${server.url}  (OpenAPI ${server.url}/openapi.json, docs ${server.url}/docs)`);
  out(`API key (admin of ${organizationId}): ${key}`);
  out(`  try: curl -s -H "Authorization: Bearer ${key}" ${server.url}/v1/campaigns`);
  out(`Dashboard: ${server.url}/ui/  (sign in with the API key above)`);
  return { url: server.url, key, close: () => server.close() };
}

/**
 * Creates and schedules a campaign through the API with an Idempotency-Key, then retries the same
 * request: one campaign, the retry answered from the key (`Idempotent-Replayed: true`).
 */
export async function scheduleThroughApi(
  api: DemoApi,
  startAt: Date,
  out: (line?: string) => void,
): Promise<string> {
  const request = () =>
    fetch(`${api.url}/v1/campaigns`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${api.key}`,
        'content-type': 'application/json',
        'idempotency-key': 'demo-api-campaign-1',
      },
      body: JSON.stringify({
        channel: 'line',
        name: 'api campaign (Idempotency-Key)',
        castType: 'broadcast',
        lineOaId: 'oa-demo',
        startAt: startAt.toISOString(),
      }),
    });
  const first = await request();
  const created = (await first.json()) as { campaignId: string; status: string };
  if (first.status !== 201)
    throw new Error(`POST /v1/campaigns answered ${first.status}: ${JSON.stringify(created)}`);
  const retry = await request();
  const replayed = (await retry.json()) as { campaignId: string };
  out(
    `API: POST /v1/campaigns → ${first.status} ${created.status} ${created.campaignId}; ` +
      `the retry with the same Idempotency-Key → ${retry.status}, Idempotent-Replayed: ${retry.headers.get('idempotent-replayed')}, ` +
      `${replayed.campaignId === created.campaignId ? 'the same campaign' : 'ANOTHER campaign'}`,
  );
  if (replayed.campaignId !== created.campaignId) throw new Error('the retry made a second campaign');
  return created.campaignId;
}

/** Keeps the API up after the demo for `holdMs` (HERALD_DEMO_API_SECONDS), or until Ctrl-C. */
export async function holdDemoApi(api: DemoApi, holdMs: number, out: (line?: string) => void): Promise<void> {
  if (holdMs <= 0) return;
  out(`the API stays up at ${api.url} for ${Math.round(holdMs / 1000)} s (Ctrl-C to stop now)`);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, holdMs);
    function done() {
      clearTimeout(timer);
      process.removeListener('SIGINT', done);
      process.removeListener('SIGTERM', done);
      resolve();
    }
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
}
