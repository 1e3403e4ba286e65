/**
 * `npm run demo`: Herald's main job end to end on locally started services. It creates a fresh demo
 * database, runs the relay, scanner and worker in this process, serves the HTTP API for the whole run
 * (its URL and an admin key of the demo's organization are printed, so the curl examples of docs/ and
 * the dashboard can be followed while it runs), then runs each registered slice's demo step in
 * registry order (campaigns, then scheduled actions, then cron jobs) and exits 0 when every step
 * reached its expected outcome. HERALD_DEMO_API_SECONDS keeps the API up that long afterwards.
 */
import { recreateDatabase } from './adapters/postgres/admin.js';
import { migrate } from './adapters/postgres/migrator.js';
import { heraldRegistry } from './aggregates/registry.js';
import { createApiKey } from './api/auth.js';
import type { RunningApiServer } from './api/server.js';
import { loadConfig } from './config.js';
import { createLogger } from './logger.js';
import type { DemoApi } from './registry/demo.js';
import type { Runtime } from './registry/role.js';
import { startApi } from './roles/api-role.js';
import { relayRole } from './roles/relay-role.js';
import { createRuntime, runRole, runTogether } from './roles/runtime.js';
import { scannerRole } from './roles/scanner-role.js';
import { workerRole } from './roles/worker-role.js';

const DEMO_DATABASE = 'herald_demo';
const DEMO_ORGANIZATION = 'org-demo';
const out = (line = '') => process.stdout.write(`${line}\n`);

async function main(): Promise<number> {
  const base = loadConfig(process.env);
  const databaseUrl = await recreateDatabase(base.databaseUrl, DEMO_DATABASE);
  // What the steps' roles talk to (the LINE test server), started before the roles.
  const setUps: { env: Readonly<Record<string, string>>; close(): Promise<void> }[] = [];
  for (const step of heraldRegistry.demos) if (step.setUp) setUps.push(await step.setUp());
  const config = loadConfig({
    // What the slices' steps need for a short demo; the environment given to the demo wins.
    ...Object.assign({}, ...heraldRegistry.demos.map((step) => step.env ?? {})),
    ...Object.assign({}, ...setUps.map((setUp) => setUp.env)),
    ...process.env,
    DATABASE_URL: databaseUrl,
    HERALD_LOG_LEVEL: process.env.HERALD_LOG_LEVEL ?? 'warn',
    HERALD_POD: 'demo',
  });
  out(
    `Herald demo: database ${DEMO_DATABASE}, broker ${new URL(config.amqpUrl?.split(',')[0] ?? 'amqp://unset').host}`,
  );
  const migrated = await migrate({ url: config.databaseUrl, schema: config.schema });
  out(`migrations applied: ${migrated.applied.join(', ')}`);

  const logger = createLogger({ level: config.logLevel, pod: config.pod, secrets: config.secrets });
  const controller = new AbortController();
  const context = { config, logger, registry: heraldRegistry };
  const roles = runTogether(controller.signal, [
    (signal) => runRole('relay', relayRole, { ...context, signal }),
    (signal) => runRole('scanner', scannerRole, { ...context, signal }),
    (signal) => runRole('worker', workerRole, { ...context, signal }),
  ]);
  roles.catch(() => controller.abort()); // a failed role ends the demo (the error surfaces below)
  const runtime = createRuntime(config, logger, { registry: heraldRegistry, applicationName: 'herald-demo' });
  let server: RunningApiServer | undefined;
  try {
    server = await startDemoServer(runtime);
    const api = await demoApi(runtime, server);
    for (const step of heraldRegistry.demos) {
      if (!(await step.run({ runtime, config, api, out }))) {
        out(`demo: the ${step.name} step did not reach its expected outcome`);
        return 1;
      }
    }
    out('demo complete: every campaign reached its expected status, each delivered campaign exactly once');
    await holdDemoApi(server.url, config.api.demoHoldMs);
    return 0;
  } finally {
    await server?.close();
    controller.abort();
    await roles;
    await runtime.close();
    for (const setUp of setUps) await setUp.close();
  }
}

/** The API on HERALD_API_HOST / HERALD_API_PORT, or any free port when that one is taken. */
async function startDemoServer(runtime: Runtime): Promise<RunningApiServer> {
  try {
    return await startApi(runtime);
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EADDRINUSE') throw error;
    const config = { ...runtime.config, api: { ...runtime.config.api, port: 0 } };
    out(`(port ${runtime.config.api.port} is taken: the API listens on another one)`);
    return startApi({ ...runtime, config });
  }
}

/** An admin key of the demo's organization, printed with the API's URL. */
async function demoApi(runtime: Runtime, server: RunningApiServer): Promise<DemoApi> {
  const { key } = await createApiKey(runtime.db, {
    organizationId: DEMO_ORGANIZATION,
    role: 'admin',
    name: 'demo',
    createdBy: 'demo',
  });
  out(`HTTP API: ${server.url}  (OpenAPI ${server.url}/openapi.json, docs ${server.url}/docs)`);
  out(`API key (admin of ${DEMO_ORGANIZATION}): ${key}`);
  out(`  try: curl -s -H "Authorization: Bearer ${key}" ${server.url}/v1/campaigns`);
  out(`Dashboard: ${server.url}/ui/  (sign in with the API key above)`);
  return { url: server.url, key, organizationId: DEMO_ORGANIZATION };
}

/** Keeps the API up after the demo for `holdMs` (HERALD_DEMO_API_SECONDS), or until Ctrl-C. */
async function holdDemoApi(url: string, holdMs: number): Promise<void> {
  if (holdMs <= 0) return;
  out(`the API stays up at ${url} for ${Math.round(holdMs / 1000)} s (Ctrl-C to stop now)`);
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

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`demo failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
