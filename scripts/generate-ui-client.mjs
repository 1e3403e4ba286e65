// Generates the typed API clients from the server's own OpenAPI document: the dashboard's
// (ui/src/api/openapi.json + ui/src/api/schema.d.ts) and the package's `herald/client`
// (src/client/generated/*, committed), both through scripts/openapi-clients.ts. The Fastify app is built
// in-process (routes registered, never listening) on a runtime whose pools connect lazily and are never
// used, so no database or broker is needed. A route or schema change then breaks `tsc` instead of a page
// or a client call at run time (ADR 0018, ADR 0034). A file is written only when its content changed.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tsImport } from 'tsx/esm/api';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const load = (path) => tsImport(join(root, path), import.meta.url);

const { loadConfig } = await load('src/config.ts');
const { createLogger } = await load('src/logger.ts');
const { createRuntime } = await load('src/roles/runtime.ts');
const { heraldRegistry } = await load('src/aggregates/registry.ts');
const { buildApiServer } = await load('src/api/server.ts');
const { generatedSources } = await load('scripts/openapi-clients.ts');

// An address nothing listens on: building the app must not touch the database (pg pools are lazy).
const config = loadConfig({
  DATABASE_URL: 'postgres://herald@127.0.0.1:9/herald_openapi_generator',
  HERALD_LOG_LEVEL: 'silent',
  HERALD_API_PORT: '0',
});
const logger = createLogger({ level: 'silent', pod: 'generate-ui-client' });
const runtime = createRuntime(config, logger, {
  registry: heraldRegistry,
  applicationName: 'herald-openapi',
});
const app = await buildApiServer({
  db: runtime.db,
  wakeups: runtime.notifier,
  listener: runtime.listener,
  config,
  registry: heraldRegistry,
  logger,
  readiness: async () => {
    throw new Error('generate-ui-client: readiness is never asked');
  },
});
const document = app.swagger();
await app.close();
await runtime.close();

const written = [];
for (const [path, content] of Object.entries(await generatedSources(document))) {
  const file = join(root, path);
  let previous = '';
  try {
    previous = readFileSync(file, 'utf8');
  } catch {}
  if (previous === content) continue;
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, content);
  written.push(path);
}
const paths = Object.keys(document.paths ?? {}).length;
process.stderr.write(
  `generate-ui-client: ${paths} paths → ${written.length ? written.join(', ') : 'every client up to date'}\n`,
);
